"""EvmSettler against a real local chain (py-evm via eth-tester) served over HTTP on loopback.

The settler speaks JSON-RPC over HTTP exactly as it would to a public node; the
server below is a thin stdlib ``http.server`` that forwards each ``eth_*`` call to
an in-process ``EthereumTester`` (a real EVM: transfers cost gas, contracts run,
historical state is kept) and encodes results the way nodes do (camelCase keys,
0x-hex quantities).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from darwin_memo.integrations.evm import (
    BALANCE_OF_SELECTOR,
    DECIMALS_SELECTOR,
    USER_AGENT,
    EvmRpc,
    EvmRpcError,
    EvmSettler,
)
from darwin_memo.ledger import Ledger

eth_tester = pytest.importorskip("eth_tester")
pytest.importorskip("eth")  # py-evm, the backend
from eth_tester import EthereumTester, PyEVMBackend  # noqa: E402
from eth_tester.exceptions import TransactionNotFound  # noqa: E402

ZERO = "0x" + "00" * 20
ETH = 10**18


# -- a JSON-RPC node over HTTP on 127.0.0.1 --------------------------------------------


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p.title() for p in rest)


def _encode(value: Any) -> Any:
    """eth-tester's Python values -> JSON-RPC wire values."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return hex(value)
    if isinstance(value, bytes):
        return "0x" + value.hex()
    if isinstance(value, dict):
        return {_camel(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _block(tag: Any) -> int | str:
    if tag in ("latest", "pending", "earliest", "safe", "finalized"):
        return "latest" if tag != "earliest" else 0
    return int(tag, 16)


class Node:
    """Dispatches JSON-RPC methods to one EthereumTester (serialised: it is not thread-safe)."""

    def __init__(self, tester: EthereumTester) -> None:
        self.t = tester
        self.lock = threading.Lock()

    def handle(self, method: str, params: list[Any]) -> Any:
        with self.lock:
            t = self.t
            if method == "eth_blockNumber":
                return hex(t.get_block_by_number("latest")["number"])
            if method == "eth_getBlockByNumber":
                return _encode(t.get_block_by_number(_block(params[0]), bool(params[1])))
            if method == "eth_getBalance":
                return hex(t.get_balance(params[0], block_number=_block(params[1])))
            if method == "eth_call":
                # eth-tester charges the caller for the call's gas cap: use a funded one
                tx = {"from": t.get_accounts()[0], **params[0]}
                return t.call(tx, _block(params[1]))
            if method == "eth_getTransactionReceipt":
                try:
                    return _encode(t.get_transaction_receipt(params[0]))
                except TransactionNotFound:
                    return None  # what nodes answer for an unknown or pending transaction
            if method == "eth_getTransactionByHash":
                tx = dict(t.get_transaction_by_hash(params[0]))
                tx.pop("data", None)
                return _encode(tx)
        raise LookupError(f"the method {method} does not exist")


Hook = Callable[[str, list[Any], Any], Any]


class RpcServer:
    """A ThreadingHTTPServer on 127.0.0.1 speaking JSON-RPC 2.0 for a ``Node``."""

    def __init__(self, node: Node, hook: Hook | None = None) -> None:
        self.node = node
        self.hook = hook
        self.user_agents: list[str] = []
        self.methods: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                server.user_agents.append(self.headers.get("User-Agent", ""))
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = json.loads(body)
                method, params = request["method"], request.get("params", [])
                server.methods.append(method)
                status = 200
                try:
                    result = server.node.handle(method, params)
                    if server.hook is not None:
                        result = server.hook(method, params, result)
                    if isinstance(result, tuple):  # (http status, raw body) from a hook
                        status, raw = result
                        self._reply(status, raw.encode())
                        return
                    reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request["id"]}
                    reply["result"] = result
                except LookupError as exc:
                    reply = {
                        "jsonrpc": "2.0",
                        "id": request["id"],
                        "error": {"code": -32601, "message": str(exc)},
                    }
                except Exception as exc:  # eth-tester refused: a node's execution error
                    reply = {
                        "jsonrpc": "2.0",
                        "id": request["id"],
                        "error": {"code": -32000, "message": f"{type(exc).__name__}: {exc}"},
                    }
                self._reply(status, json.dumps(reply).encode())

            def _reply(self, status: int, raw: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def tester() -> EthereumTester:
    return EthereumTester(PyEVMBackend())


@pytest.fixture
def node(tester: EthereumTester) -> Node:
    return Node(tester)


@pytest.fixture
def server(node: Node) -> Iterator[RpcServer]:
    srv = RpcServer(node)
    yield srv
    srv.close()


@pytest.fixture
def rpc(server: RpcServer) -> EvmRpc:
    return EvmRpc(server.url, timeout=10)


def send(t: EthereumTester, **tx: Any) -> str:
    tx.setdefault("gas", 100_000)
    return str(t.send_transaction(tx))


# -- a toy ERC-20 in hand-assembled EVM bytecode -----------------------------------------

OPS = {
    "STOP": 0x00, "ADD": 0x01, "EQ": 0x14, "SHR": 0x1C, "CALLDATALOAD": 0x35,
    "CODECOPY": 0x39, "MSTORE": 0x52, "SLOAD": 0x54, "SSTORE": 0x55, "JUMPI": 0x57,
    "JUMPDEST": 0x5B, "DUP1": 0x80, "RETURN": 0xF3, "REVERT": 0xFD,
}  # fmt: skip
MINT_SELECTOR = "40c10f19"  # mint(address,uint256)


def assemble(program: list[Any]) -> bytes:
    """Ops are names, ("PUSH", n, value) pushes, ("LABEL", x) marks, ("PUSHL", x) pushes a label."""

    def size(op: Any) -> int:
        if isinstance(op, str):
            return 1
        if op[0] == "PUSH":
            return 1 + op[1]
        return 2 if op[0] == "PUSHL" else (1 if op[0] == "LABEL" else 0)

    labels, pc = {}, 0
    for op in program:
        if isinstance(op, tuple) and op[0] == "LABEL":
            labels[op[1]] = pc
        pc += size(op)
    out = bytearray()
    for op in program:
        if isinstance(op, str):
            out.append(OPS[op])
        elif op[0] == "PUSH":
            out.append(0x5F + op[1])
            out += op[2].to_bytes(op[1], "big")
        elif op[0] == "PUSHL":
            out += bytes([0x60, labels[op[1]]])
        else:  # LABEL
            out.append(OPS["JUMPDEST"])
    return bytes(out)


def token_runtime() -> bytes:
    """balanceOf(a) -> storage[a]; decimals() -> 6; mint(a, n): storage[a] += n; else revert."""
    arg0 = [("PUSH", 1, 4), "CALLDATALOAD"]
    return assemble(
        [
            ("PUSH", 1, 0), "CALLDATALOAD", ("PUSH", 1, 0xE0), "SHR",
            "DUP1", ("PUSH", 4, int(BALANCE_OF_SELECTOR, 16)), "EQ", ("PUSHL", "bal"), "JUMPI",
            "DUP1", ("PUSH", 4, int(DECIMALS_SELECTOR, 16)), "EQ", ("PUSHL", "dec"), "JUMPI",
            "DUP1", ("PUSH", 4, int(MINT_SELECTOR, 16)), "EQ", ("PUSHL", "mint"), "JUMPI",
            ("PUSH", 1, 0), "DUP1", "REVERT",
            ("LABEL", "bal"), *arg0, "SLOAD", ("PUSH", 1, 0), "MSTORE",
            ("PUSH", 1, 32), ("PUSH", 1, 0), "RETURN",
            ("LABEL", "dec"), ("PUSH", 1, 6), ("PUSH", 1, 0), "MSTORE",
            ("PUSH", 1, 32), ("PUSH", 1, 0), "RETURN",
            ("LABEL", "mint"), ("PUSH", 1, 0x24), "CALLDATALOAD", *arg0, "SLOAD", "ADD",
            *arg0, "SSTORE", "STOP",
        ]
    )  # fmt: skip


def deploy_token(t: EthereumTester, sender: str) -> str:
    runtime = token_runtime()
    n = len(runtime)
    init = assemble(
        [("PUSH", 1, n), ("PUSH", 1, 12), ("PUSH", 1, 0), "CODECOPY",
         ("PUSH", 1, n), ("PUSH", 1, 0), "RETURN"]
    )  # fmt: skip
    assert len(init) == 12
    h = t.send_transaction({"from": sender, "gas": 300_000, "data": "0x" + (init + runtime).hex()})
    address = t.get_transaction_receipt(h)["contract_address"]
    assert address
    return str(address)


def mint_data(to: str, amount: int) -> str:
    return "0x" + MINT_SELECTOR + to[2:].lower().rjust(64, "0") + hex(amount)[2:].rjust(64, "0")


# -- native balances ---------------------------------------------------------------------


def test_transfer_is_the_delta_and_gas_is_measured(
    tester: EthereumTester, rpc: EvmRpc, server: RpcServer
) -> None:
    alice, bob = tester.get_accounts()[:2]
    payee = EvmSettler(bob, rpc=rpc)
    payer = EvmSettler(alice, rpc=rpc)
    b0, a0 = payee.snapshot(), payer.snapshot()
    assert b0["block"] == a0["block"] == 0
    h = send(tester, **{"from": alice, "to": bob, "value": 2 * ETH, "gas": 21_000})
    b1, a1 = payee.snapshot(), payer.snapshot()
    assert b1["block"] == 1
    assert payee.delta(b0, b1) == 2.0 * ETH
    cost = payer.tx_cost(h)
    assert cost["status"] is True and cost["value_wei"] == 2 * ETH
    receipt = tester.get_transaction_receipt(h)
    assert cost["gas_wei"] == 21_000 * receipt["effective_gas_price"] > 0
    # the payer's balance fell by exactly value + gas: the chain agrees with tx_cost
    assert EvmSettler.delta(a0, a1) == -float(cost["value_wei"] + cost["gas_wei"])
    assert payee.token_decimals() == 18
    assert set(server.user_agents) == {USER_AGENT}


def test_snapshot_at_a_past_block_reads_that_state(tester: EthereumTester, rpc: EvmRpc) -> None:
    alice, bob = tester.get_accounts()[:2]
    settler = EvmSettler(bob, rpc=rpc)
    start = settler.snapshot()
    for _ in range(3):
        send(tester, **{"from": alice, "to": bob, "value": ETH, "gas": 21_000})
    assert settler.snapshot(block=start["block"]) == start
    assert settler.snapshot(block=2)["balance"] - start["balance"] == 2 * ETH
    assert settler.snapshot()["block"] == 3
    with pytest.raises(EvmRpcError) as err:
        settler.snapshot(block=99)  # beyond the head: the node's error comes through
    assert err.value.code == -32000


def test_block_at_and_measure(tester: EthereumTester, rpc: EvmRpc) -> None:
    alice, bob = tester.get_accounts()[:2]
    genesis = tester.get_block_by_number(0)["timestamp"]
    tester.time_travel(genesis + 100)  # a block about 100 s after genesis
    send(tester, **{"from": alice, "to": bob, "value": 3 * ETH, "gas": 21_000})
    tester.time_travel(genesis + 1000)  # a gap of about 900 s
    send(tester, **{"from": alice, "to": bob, "value": 5 * ETH, "gas": 21_000})
    head = rpc.block_number()
    assert head == 4
    stamps = [rpc.block_timestamp(n) for n in range(head + 1)]
    assert stamps == [tester.get_block_by_number(n)["timestamp"] for n in range(head + 1)]
    assert stamps == sorted(stamps) and stamps[1] - stamps[0] >= 50
    settler = EvmSettler(bob, rpc=rpc)
    assert settler.block_at(genesis - 50) == 0  # clamped to 0
    assert settler.block_at(10**12) == head  # clamped to the head
    for n, ts in enumerate(stamps):
        if n + 1 < len(stamps) and stamps[n + 1] == ts:
            continue  # two blocks in one second: the later one is "the last block at ts"
        assert settler.block_at(ts) == n
        if n > 0 and stamps[n - 1] < ts - 1:
            assert settler.block_at(ts - 1) == n - 1
    first_transfer = 2  # block 2 holds the 3 ETH transfer, block 4 the 5 ETH one
    assert settler.measure(genesis, stamps[first_transfer]) == 3.0 * ETH
    assert settler.measure(genesis, stamps[3]) == 3.0 * ETH
    assert settler.measure(genesis, stamps[4]) == 8.0 * ETH
    assert settler.measure(stamps[4], stamps[4] + 5) == 0.0
    # The published keyword names.
    assert settler.measure(start_ts=genesis, end_ts=stamps[4]) == 8.0 * ETH
    assert settler.measure(start_timestamp=genesis, end_timestamp=stamps[4]) == 8.0 * ETH


# -- ERC-20 -------------------------------------------------------------------------------


def test_token_balance_decimals_and_reverted_tx(tester: EthereumTester, rpc: EvmRpc) -> None:
    alice, bob = tester.get_accounts()[:2]
    token = deploy_token(tester, alice)
    settler = EvmSettler(bob, rpc=rpc, token=token)
    assert settler.token_decimals() == 6
    before = settler.snapshot()
    assert before["balance"] == 0
    send(tester, **{"from": alice, "to": token, "data": mint_data(bob, 1_500_000)})
    send(tester, **{"from": alice, "to": token, "data": mint_data(alice, 7)})  # not bob's
    after = settler.snapshot()
    assert settler.delta(before, after) == 1_500_000.0
    # the native balance of bob did not move
    native = EvmSettler(bob, rpc=rpc)
    assert native.snapshot(before["block"])["balance"] == native.snapshot()["balance"]

    # a call the token rejects: mined, reverted, gas paid, no value moved
    h = str(
        tester.send_transaction(
            {"from": alice, "to": token, "value": ETH, "gas": 100_000, "data": "0xdeadbeef"}
        )
    )
    cost = EvmSettler(alice, rpc=rpc).tx_cost(h)
    assert cost["status"] is False and cost["value_wei"] == 0 and cost["gas_wei"] > 0

    # an address with no code returns empty data: an error, never a zero balance
    with pytest.raises(EvmRpcError, match="empty"):
        EvmSettler(bob, rpc=rpc, token=alice).token_decimals()
    with pytest.raises(EvmRpcError, match="empty"):
        EvmSettler(bob, rpc=rpc, token=alice).snapshot()


# -- settling a ticket ----------------------------------------------------------------


def test_settle_a_ticket_with_the_measured_delta(
    tester: EthereumTester, rpc: EvmRpc, tmp_path: Any
) -> None:
    alice, bob = tester.get_accounts()[:2]
    ledger = Ledger.open(tmp_path / "m.db")
    entry = ledger.add("Where should idle funds be parked?", "Send them to the treasury address.")
    ticket = ledger.decide("where do idle funds go")
    assert ticket.deciding_entry == entry.id
    settler = EvmSettler(bob, rpc=rpc)
    before = settler.snapshot()
    send(tester, **{"from": alice, "to": bob, "value": 4 * ETH, "gas": 21_000})  # the agent acts
    after = settler.snapshot()
    energy = entry.energy
    assert ledger.settle(ticket.id, settler.delta(before, after) / ETH, detail="ETH delta")
    got = ledger.store.get(entry.id)
    assert got is not None and got.energy > energy
    ledger.close()


# -- cross-checking and failures -------------------------------------------------------


def test_verify_rpc_agrees_and_catches_a_liar(tester: EthereumTester, node: Node) -> None:
    bob = tester.get_accounts()[1]
    primary, honest = RpcServer(node), RpcServer(node)

    def lie(method: str, params: list[Any], result: Any) -> Any:
        if method == "eth_getBalance":
            return hex(int(result, 16) + 1)
        return result

    liar = RpcServer(node, hook=lie)
    try:
        ok = EvmSettler(bob, rpc=primary.url, verify_rpc=EvmRpc(honest.url))
        snap = ok.snapshot()
        assert snap["balance"] == tester.get_balance(bob)
        assert "eth_getBalance" in honest.methods
        bad = EvmSettler(bob, rpc=EvmRpc(primary.url), verify_rpc=liar.url)
        with pytest.raises(EvmRpcError, match="disagree"):
            bad.snapshot()
    finally:
        for srv in (primary, honest, liar):
            srv.close()


def test_transport_and_protocol_errors(node: Node) -> None:
    replies: dict[str, Any] = {}

    def hook(method: str, params: list[Any], result: Any) -> Any:
        return replies.get(method, result)

    srv = RpcServer(node, hook=hook)
    try:
        rpc = EvmRpc(srv.url, timeout=5)
        with pytest.raises(EvmRpcError) as err:
            rpc.call("eth_noSuchMethod")
        assert err.value.code == -32601 and "does not exist" in str(err.value)
        # a JSON-RPC error wrapped in an HTTP error keeps its code and message
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32005, "message": "rate limited"}}
        )
        replies["eth_blockNumber"] = (429, body)
        with pytest.raises(EvmRpcError, match="rate limited") as err:
            rpc.block_number()
        assert err.value.code == -32005 and "rate limited" in err.value.body
        replies["eth_blockNumber"] = (502, "<html>bad gateway</html>")
        with pytest.raises(EvmRpcError, match="HTTP 502") as err:
            rpc.block_number()
        assert err.value.code == 502
        replies["eth_blockNumber"] = (200, "not json")
        with pytest.raises(EvmRpcError, match="not JSON"):
            rpc.block_number()
        replies["eth_blockNumber"] = (
            200,
            json.dumps({"jsonrpc": "2.0", "id": 99, "result": "0x1"}),
        )
        with pytest.raises(EvmRpcError, match="not"):
            rpc.block_number()
        for bad in ("12", "0x-1", "0x", "0x1_0", 7):  # not hex quantities
            replies["eth_blockNumber"] = bad
            with pytest.raises(EvmRpcError, match=r"hex|empty"):
                rpc.block_number()
        replies["eth_getBlockByNumber"] = None
        with pytest.raises(EvmRpcError, match="not found"):
            rpc.block_timestamp(0)
        replies["eth_getTransactionReceipt"] = None
        with pytest.raises(EvmRpcError, match="no receipt"):
            EvmSettler(ZERO, rpc=rpc).tx_cost("0x" + "ab" * 32)
    finally:
        srv.close()
    # nothing listens there any more
    with pytest.raises(EvmRpcError, match="cannot reach"):
        EvmRpc(srv.url, timeout=2).block_number()


def test_l1_fee_is_added_to_gas(tester: EthereumTester, node: Node) -> None:
    alice, bob = tester.get_accounts()[:2]
    h = send(tester, **{"from": alice, "to": bob, "value": 1, "gas": 21_000})

    def op_stack(method: str, params: list[Any], result: Any) -> Any:
        if method == "eth_getTransactionReceipt":
            return {**result, "l1Fee": hex(12345)}
        return result

    srv = RpcServer(node, hook=op_stack)
    try:
        cost = EvmSettler(alice, rpc=srv.url).tx_cost(h)
        price = tester.get_transaction_receipt(h)["effective_gas_price"]
        assert cost == {"status": True, "gas_wei": 21_000 * price + 12345, "value_wei": 1}
    finally:
        srv.close()


def test_argument_validation() -> None:
    with pytest.raises(ValueError, match="40 hex"):
        EvmSettler("0x1234", rpc="http://127.0.0.1:1")
    with pytest.raises(ValueError, match="token"):
        EvmSettler(ZERO, rpc="http://127.0.0.1:1", token="nope")
    with pytest.raises(ValueError):
        EvmRpc("ftp://example")
    for bad_timeout in (0, -1, float("nan")):
        with pytest.raises(ValueError, match="timeout"):
            EvmRpc("http://127.0.0.1:1", timeout=bad_timeout)
    settler = EvmSettler(ZERO, rpc="http://127.0.0.1:1")
    with pytest.raises(ValueError):
        settler.tx_cost("0x12")
    with pytest.raises(ValueError):
        settler.snapshot(block=-1)
    with pytest.raises(ValueError):
        settler.block_at(float("nan"))
    with pytest.raises(ValueError):
        EvmSettler.delta({"block": 1}, {"block": 2, "balance": 3})
    assert EvmSettler.delta({"block": 1, "balance": 2**60}, {"block": 2, "balance": 2**60 + 3}) == 3
