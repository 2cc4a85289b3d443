"""On-chain outcomes as the measured signal: balance deltas and gas over JSON-RPC.

An agent that acts on chain has an outcome nobody has to judge: the balance of
the address it manages went up or down, and each transaction burned gas. This
module reads those numbers from any Ethereum JSON-RPC endpoint with the
standard library (``urllib``) and hands them to ``Ledger.settle``::

    settler = EvmSettler("0x...agent address...", rpc=EvmRpc("http://127.0.0.1:8545"))
    ticket = ledger.decide("how should I rebalance the pool?")
    before = settler.snapshot()
    ...  # the agent acts on the answer
    after = settler.snapshot()
    ledger.settle(ticket.id, settler.delta(before, after) / 10**18, detail="ETH delta")

* One settler watches one conserved resource of one address: the native balance
  in wei, or an ERC-20 balance in the token's raw units (``token=`` the contract;
  ``balanceOf`` selector ``0x70a08231``). Scale it yourself (``token_decimals``)
  or give the ledger a ``resource_scale``.
* ``snapshot`` pins the head block first and reads the balance *at that block*,
  so a before/after pair compares two definite states; it needs no archive node
  as long as both snapshots are taken while their blocks are recent. ``measure``
  between two past timestamps does need historical state (an archive node).
* ``verify_rpc`` names a second, independent endpoint: every snapshot is read
  from both and must agree, so one lying or lagging provider cannot settle a
  ticket on its own. Public load-balanced fronts differ in how much history they
  keep, and some answer requests for pruned history with the *current* state or
  zero instead of an error; cross-checking (or an archive node you run) is the
  defence.
* Every failure (network, HTTP, a JSON-RPC error object, a reply that does not
  decode) is ``EvmRpcError``: a settlement should then be skipped, not guessed.
  The transport is ``darwin_memo.answer.http``: ``timeout`` is a deadline for the
  whole reply, replies over ``MAX_REPLY_BYTES`` are refused, and a redirect is
  refused rather than followed (urllib would turn the POST into a GET and accept
  whatever the new host says); give the final URL instead.
* Hosted providers put the API key in the URL (``https://mainnet.infura.io/v3/<key>``,
  ``.../v2/<key>``, ``?apikey=...``). Messages, ``repr`` and error bodies show the
  URL through ``httpwire.redact_url`` (the key as ``[redacted]``), and the key is
  scrubbed from text the server sends back; ``EvmRpc.url`` keeps it as given.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import threading
from typing import Any

from ..aliases import keyword_aliases
from ..answer import http as httpwire

__all__ = [
    "BALANCE_OF_SELECTOR",
    "DECIMALS_SELECTOR",
    "DEFAULT_BASE_RPC",
    "MAX_REPLY_BYTES",
    "USER_AGENT",
    "EvmRpc",
    "EvmRpcError",
    "EvmSettler",
]

DEFAULT_BASE_RPC = "https://mainnet.base.org"
#: Public RPC fronts refuse urllib's default ``Python-urllib/x.y`` agent with 403.
USER_AGENT = "darwin-memo-evm/1"
BALANCE_OF_SELECTOR = "0x70a08231"
DECIMALS_SELECTOR = "0x313ce567"

_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
_TX_HASH = re.compile(r"^0x[0-9a-fA-F]{64}$")
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_BODY_KEEP = 2000
#: Replies larger than this are refused (the calls made here return a few hundred bytes).
MAX_REPLY_BYTES = 16 * 1024 * 1024


class EvmRpcError(RuntimeError):
    """A JSON-RPC call failed: transport, HTTP, an ``error`` reply, or an undecodable result."""

    def __init__(self, message: str, code: int = 0, body: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.body = body


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        text = text.replace(secret, "[redacted]")
    return text


def _quantity(value: Any, what: str) -> int:
    """Decode a JSON-RPC quantity (``0x``-prefixed hex) to an int."""
    if isinstance(value, str) and value[:2].lower() == "0x":
        digits = value[2:]
        if digits == "":
            raise EvmRpcError(f"{what}: empty result (0x)")
        if _HEX.match(digits):
            return int(digits, 16)
    raise EvmRpcError(f"{what}: expected a 0x-prefixed hex quantity, got {value!r}")


def _word(value: Any, what: str) -> int:
    """Decode ``eth_call`` return data holding one 32-byte word (ABI uint256)."""
    if not isinstance(value, str) or value[:2].lower() != "0x":
        raise EvmRpcError(f"{what}: expected 0x-prefixed return data, got {value!r}")
    data = value[2:]
    if not data:
        raise EvmRpcError(f"{what}: empty return data (0x): no contract code at that address?")
    if len(data) < 64 or len(data) % 2:
        raise EvmRpcError(f"{what}: return data is not a 32-byte word: {value!r}")
    if not _HEX.match(data):
        raise EvmRpcError(f"{what}: return data is not hex: {value!r}")
    return int(data[:64], 16)


def _address(value: Any, what: str) -> str:
    if not isinstance(value, str) or not _ADDRESS.match(value):
        raise ValueError(f"{what} must be 0x followed by 40 hex digits, got {value!r}")
    return value


def _block_tag(block: int) -> str:
    if isinstance(block, bool) or not isinstance(block, int) or block < 0:
        raise ValueError(f"a block number must be a non-negative integer, got {block!r}")
    return hex(block)


class EvmRpc:
    """A JSON-RPC 2.0 client over ``urllib`` (POST, JSON body, one call per request).

    ``timeout`` (seconds) bounds each whole call; redirects are refused.
    """

    def __init__(self, url: str = DEFAULT_BASE_RPC, timeout: float = 30.0) -> None:
        if not isinstance(url, str) or not url.lower().startswith(("http://", "https://")):
            shown = httpwire.redact_url(url) if isinstance(url, str) else url
            raise ValueError(f"the RPC url must be http:// or https://, got {shown!r}")
        self.url = url
        self.timeout = float(timeout)
        if not self.timeout > 0:  # also refuses NaN
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._ids = itertools.count(1)
        self._id_lock = threading.Lock()

    @property
    def shown_url(self) -> str:
        """``url`` as messages show it: a key in its path or query as ``[redacted]``."""
        return httpwire.redact_url(self.url)

    def __repr__(self) -> str:
        return f"EvmRpc({self.shown_url!r})"

    def call(self, method: str, params: list[Any] | None = None) -> Any:
        """Call ``method`` and return its ``result``; ``EvmRpcError`` on any failure.

        Every ``EvmRpcError`` raised here shows the URL without its key, and has the
        key scrubbed from its message and body (a provider may echo it back).
        """
        try:
            return self._call(method, params)
        except EvmRpcError as exc:
            secrets = httpwire.url_secrets(self.url)
            if not secrets:
                raise
            raise EvmRpcError(
                _scrub(exc.message, secrets), code=exc.code, body=_scrub(exc.body, secrets)
            ) from None

    def _call(self, method: str, params: list[Any] | None) -> Any:
        with self._id_lock:
            request_id = next(self._ids)
        payload = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or []}
        try:
            answer = httpwire.exchange(
                self.url,
                data=json.dumps(payload).encode(),
                headers={
                    "Content-Type": "application/json",
                    "Accept": "application/json",
                    "User-Agent": USER_AGENT,
                },
                timeout=self.timeout,
                max_bytes=MAX_REPLY_BYTES,
            )
        except httpwire.WireError as exc:
            if exc.kind == "connect":
                raise EvmRpcError(f"{method}: cannot reach {self.shown_url}: {exc}") from None
            hint = " (set the RPC url to the final URL)" if exc.kind == "redirect" else ""
            raise EvmRpcError(f"{method}: {self.shown_url}: {exc}{hint}", code=exc.status) from None
        if answer.status >= 300:
            body = answer.body.decode("utf-8", "replace")
            # Some providers wrap a JSON-RPC error (rate limit, bad params) in a 4xx/5xx.
            self._raise_rpc_error(method, body, http_status=answer.status)
            raise EvmRpcError(
                f"{method}: HTTP {answer.status} from {self.shown_url}",
                code=answer.status,
                body=body[:_BODY_KEEP],
            )
        body = answer.body.decode("utf-8", "replace")
        try:
            reply = httpwire.parse_json(body)
        except (ValueError, RecursionError) as exc:
            what = "" if isinstance(exc, json.JSONDecodeError) else f" we accept ({exc})"
            raise EvmRpcError(
                f"{method}: the reply is not JSON{what}", body=body[:_BODY_KEEP]
            ) from None
        if not isinstance(reply, dict):
            raise EvmRpcError(
                f"{method}: the reply is not a JSON-RPC object", body=body[:_BODY_KEEP]
            )
        self._raise_rpc_error(method, body, reply=reply)
        if "result" not in reply:
            raise EvmRpcError(f"{method}: the reply has no result", body=body[:_BODY_KEEP])
        if str(reply.get("id")) != str(request_id):
            raise EvmRpcError(
                f"{method}: the reply answers request {reply.get('id')!r}, not {request_id}",
                body=body[:_BODY_KEEP],
            )
        return reply["result"]

    @staticmethod
    def _raise_rpc_error(
        method: str, body: str, *, reply: Any = None, http_status: int | None = None
    ) -> None:
        if reply is None:
            try:
                reply = httpwire.parse_json(body)
            except (ValueError, RecursionError):
                return
        if not isinstance(reply, dict) or reply.get("error") is None:
            return
        error = reply["error"]
        if isinstance(error, dict):
            message = str(error.get("message", "unknown error"))
            code = error.get("code", 0)
            code = code if isinstance(code, int) and not isinstance(code, bool) else 0
        else:
            message, code = str(error), 0
        where = f" (HTTP {http_status})" if http_status is not None else ""
        raise EvmRpcError(f"{method}: {message}{where}", code=code, body=body[:_BODY_KEEP])

    def block_number(self) -> int:
        """The head block number."""
        return _quantity(self.call("eth_blockNumber"), "eth_blockNumber")

    def block_timestamp(self, block: int) -> int:
        """The timestamp (Unix seconds) of block ``block``."""
        result = self.call("eth_getBlockByNumber", [_block_tag(block), False])
        if not isinstance(result, dict):
            raise EvmRpcError(f"eth_getBlockByNumber: block {block} not found")
        return _quantity(result.get("timestamp"), f"timestamp of block {block}")


def _as_rpc(rpc: EvmRpc | str | None, what: str) -> EvmRpc:
    if rpc is None:
        return EvmRpc()
    if isinstance(rpc, str):
        return EvmRpc(rpc)
    if isinstance(rpc, EvmRpc):
        return rpc
    raise TypeError(f"{what} must be an EvmRpc or a URL, got {type(rpc).__name__}")


class EvmSettler:
    """Measures one address's balance (native wei, or raw ERC-20 units of ``token``)."""

    def __init__(
        self,
        address: str,
        rpc: EvmRpc | str | None = None,
        token: str | None = None,
        verify_rpc: EvmRpc | str | None = None,
    ) -> None:
        self.address = _address(address, "address")
        self.token = _address(token, "token") if token is not None else None
        self.rpc = _as_rpc(rpc, "rpc")
        self.verify_rpc = _as_rpc(verify_rpc, "verify_rpc") if verify_rpc is not None else None

    def __repr__(self) -> str:
        token = f", token={self.token!r}" if self.token else ""
        return f"EvmSettler({self.address!r}, rpc={self.rpc!r}{token})"

    # -- balances -----------------------------------------------------------------

    def _balance(self, rpc: EvmRpc, block: int) -> int:
        tag = _block_tag(block)
        if self.token is None:
            return _quantity(
                rpc.call("eth_getBalance", [self.address, tag]), f"balance at block {block}"
            )
        data = BALANCE_OF_SELECTOR + self.address[2:].lower().rjust(64, "0")
        result = rpc.call("eth_call", [{"to": self.token, "data": data}, tag])
        return _word(result, f"balanceOf at block {block}")

    def snapshot(self, block: int | None = None) -> dict[str, int]:
        """``{"block", "balance"}`` at ``block`` (default: the head, resolved first).

        With ``verify_rpc`` the balance at that block is read from both endpoints
        and they must agree, else ``EvmRpcError``.
        """
        if block is None:
            block = self.rpc.block_number()
        balance = self._balance(self.rpc, block)
        if self.verify_rpc is not None:
            other = self._balance(self.verify_rpc, block)
            if other != balance:
                raise EvmRpcError(
                    f"the endpoints disagree on the balance at block {block}: "
                    f"{self.rpc.shown_url} says {balance}, "
                    f"{self.verify_rpc.shown_url} says {other}"
                )
        return {"block": block, "balance": balance}

    @staticmethod
    def delta(before: dict[str, int], after: dict[str, int]) -> float:
        """``after.balance - before.balance`` as a float (exact while below 2**53)."""
        for name, snap in (("before", before), ("after", after)):
            if not isinstance(snap, dict) or not isinstance(snap.get("balance"), int):
                raise ValueError(f"{name} must be a snapshot: a dict with an int 'balance'")
        return float(after["balance"] - before["balance"])

    # -- time -------------------------------------------------------------------------

    def block_at(self, timestamp: int | float) -> int:
        """The last block at or before ``timestamp`` (clamped to the head and to 0)."""
        if (
            isinstance(timestamp, bool)
            or not isinstance(timestamp, (int, float))
            or not math.isfinite(timestamp)
        ):
            raise ValueError(f"timestamp must be a finite number, got {timestamp!r}")
        head = self.rpc.block_number()
        if self.rpc.block_timestamp(head) <= timestamp:
            return head
        if self.rpc.block_timestamp(0) > timestamp:
            return 0
        lo, hi = 0, head  # invariant: ts(lo) <= timestamp < ts(hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.rpc.block_timestamp(mid) <= timestamp:
                lo = mid
            else:
                hi = mid
        return lo

    @keyword_aliases(start_ts="start_timestamp", end_ts="end_timestamp")
    def measure(self, start_timestamp: int | float, end_timestamp: int | float) -> float:
        """The balance change between two times (needs historical state: an archive node).

        ``start_ts``/``end_ts`` are accepted as keyword spellings too.
        """
        before = self.snapshot(self.block_at(start_timestamp))
        after = self.snapshot(self.block_at(end_timestamp))
        return self.delta(before, after)

    # -- transactions ---------------------------------------------------------------

    def tx_cost(self, tx_hash: str) -> dict[str, Any]:
        """``{"status", "gas_wei", "value_wei"}`` of a mined transaction.

        ``gas_wei = gasUsed * effectiveGasPrice + l1Fee`` (the L1 data fee that OP
        Stack chains such as Base add to receipts; 0 elsewhere). ``value_wei`` is
        the value sent, 0 when the transaction reverted (nothing moved).
        """
        if not isinstance(tx_hash, str) or not _TX_HASH.match(tx_hash):
            raise ValueError(f"tx_hash must be 0x followed by 64 hex digits, got {tx_hash!r}")
        receipt = self.rpc.call("eth_getTransactionReceipt", [tx_hash])
        if not isinstance(receipt, dict):
            raise EvmRpcError(f"no receipt for {tx_hash}: not mined yet, or unknown")
        status = _quantity(receipt.get("status"), "receipt status") == 1
        gas_used = _quantity(receipt.get("gasUsed"), "receipt gasUsed")
        tx: dict[str, Any] | None = None
        price_field = receipt.get("effectiveGasPrice")
        if price_field is None:  # receipts from before London lack it
            tx = self._transaction(tx_hash)
            price_field = tx.get("gasPrice")
        price = _quantity(price_field, "effectiveGasPrice")
        l1_fee = receipt.get("l1Fee")
        gas_wei = gas_used * price + (_quantity(l1_fee, "l1Fee") if l1_fee is not None else 0)
        value = 0
        if status:
            tx = tx if tx is not None else self._transaction(tx_hash)
            value = _quantity(tx.get("value"), "transaction value")
        return {"status": status, "gas_wei": gas_wei, "value_wei": value}

    def _transaction(self, tx_hash: str) -> dict[str, Any]:
        tx = self.rpc.call("eth_getTransactionByHash", [tx_hash])
        if not isinstance(tx, dict):
            raise EvmRpcError(f"no transaction {tx_hash}")
        return tx

    def token_decimals(self) -> int:
        """18 for the native coin; else the token's ``decimals()``."""
        if self.token is None:
            return 18
        result = self.rpc.call(
            "eth_call", [{"to": self.token, "data": DECIMALS_SELECTOR}, "latest"]
        )
        return _word(result, "decimals()")
