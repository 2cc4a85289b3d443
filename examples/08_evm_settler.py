"""08: on-chain balance deltas as the selection signal.

A wallet's balance is a conserved resource nobody can argue with: every action
an agent takes on chain moves it by an exact amount, gas included. ``EvmSettler``
reads it over plain JSON-RPC (no key, no web3 library) and the measured delta
settles the ticket of the advice that led to the action.

This script starts a private chain in-process (py-evm through ``eth-tester``),
serves it over JSON-RPC on 127.0.0.1 exactly as a node would, and lets an agent
act on advice from a ledger for a few rounds: one lesson says paying a small fee
to claim a staking rebate pays off (it does: the rebate comes back), a forum lesson
says a "doubler" address returns twice what it is sent (it keeps everything).
The settler measures the agent's wallet before and after each action.

Without ``eth-tester`` it says what to install and exits; nothing else is needed
(``darwin_memo.evm`` itself has no dependencies). Against a real chain, point
``EvmRpc`` at your node's URL instead of the local server.

    pip install "eth-tester[py-evm]"
    python examples/08_evm_settler.py
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from darwin_memo import EvmRpc, EvmSettler, Ledger, MemoryStore, decision_polarity

ETH = 10**18
LESSONS = (  # (source, question, answer)
    ("ops-notes", "Is paying the fee to claim the staking rebate worth it?",
     "Yes: paying the 0.1 ETH fee to claim the staking rebate returns a 0.5 ETH rebate."),
    ("forum", "Should idle ETH be sent to the doubler address?",
     "Yes: the doubler address sends back twice the ETH it is sent, so idle ETH should go there."),
    ("chat", "When is the validator meetup?", "The validator meetup is on Thursdays."),
)  # fmt: skip
TASKS = (
    "Should the agent pay the fee to claim the staking rebate?",
    "Should the agent send 1 ETH of idle ETH to the doubler address?",
)


class LocalNode:
    """A py-evm chain answering the JSON-RPC methods EvmSettler uses, on 127.0.0.1."""

    def __init__(self) -> None:
        from eth_tester import EthereumTester, PyEVMBackend

        self.chain = EthereumTester(PyEVMBackend())
        self.lock = threading.Lock()
        node = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with node.lock:
                    result = node.answer(request["method"], request.get("params", []))
                body = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, method: str, params: list[Any]) -> Any:
        chain = self.chain
        if method == "eth_blockNumber":
            return hex(chain.get_block_by_number("latest")["number"])
        if method == "eth_getBalance":
            tag = params[1]
            block = tag if tag in ("latest", "pending") else int(tag, 16)
            return hex(chain.get_balance(params[0], block_number=block))
        if method == "eth_getTransactionReceipt":
            r = chain.get_transaction_receipt(params[0])
            return {"status": hex(r["status"]), "gasUsed": hex(r["gas_used"]),
                    "effectiveGasPrice": hex(r["effective_gas_price"])}  # fmt: skip
        if method == "eth_getTransactionByHash":
            return {"value": hex(chain.get_transaction_by_hash(params[0])["value"])}
        raise ValueError(f"this local node does not serve {method}")

    def send(self, sender: str, to: str, wei: int) -> str:
        with self.lock:
            return str(self.chain.send_transaction(
                {"from": sender, "to": to, "value": wei, "gas": 21_000}
            ))  # fmt: skip

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6, help="rounds of both tasks (6)")
    args = parser.parse_args()
    try:
        import eth  # noqa: F401  (py-evm, the chain itself)
        import eth_tester  # noqa: F401
    except ImportError:
        print("This example runs a private EVM chain, which needs eth-tester and py-evm:")
        print('  pip install "eth-tester[py-evm]"')
        print("darwin_memo.evm itself needs nothing: EvmSettler(address, rpc=URL) reads any node.")
        return 0

    node = LocalNode()
    try:
        agent, rebate, doubler = node.chain.get_accounts()[1:4]
        settler = EvmSettler(agent, rpc=EvmRpc(node.url, timeout=10))
        ledger = Ledger(MemoryStore(), resource_scale=0.5)  # deltas in ETH
        ids = {src: ledger.add(q, a, source=src).id for src, q, a in LESSONS}
        print(f"chain on {node.url}; agent wallet {agent}")
        print(f"{len(ids)} lessons; the forum one is a scam\n")
        print(
            "round  task                 advice                      acted  measured ETH   gas ETH"
        )

        for rnd in range(args.rounds):
            for task in TASKS:
                ticket = ledger.decide(task)
                advice = ticket.answer.splitlines()[0] if ticket.answer else "(silent)"
                act = decision_polarity(advice) is True
                before = settler.snapshot()
                gas = 0
                if act and "rebate" in task:  # pay the fee; the rebate contract pays back
                    tx = node.send(agent, rebate, ETH // 10)
                    node.send(rebate, agent, ETH // 2)
                    gas = settler.tx_cost(tx)["gas_wei"]
                elif act:  # the doubler keeps what it is sent
                    tx = node.send(agent, doubler, ETH)
                    gas = settler.tx_cost(tx)["gas_wei"]
                after = settler.snapshot()
                delta = settler.delta(before, after) / ETH  # the measurement, gas included
                if ticket.answer:
                    ledger.settle(ticket.id, delta, detail=f"wallet delta, block {after['block']}")
                label = "claim rebate" if "rebate" in task else "send to doubler"
                print(
                    f"{rnd:5}  {label:19}  {advice[:26]:26}  {'yes' if act else 'no':5}"
                    f"  {delta:+12.6f}  {gas / ETH:8.6f}"
                )
            ledger.tick()

        print("\nthe forum lesson's life:")
        print(ledger.obituary(ids["forum"]))
        print("\nsurvivors:")
        for entry in sorted(ledger.store.alive(), key=lambda e: -e.energy):
            print(f"  {entry.energy:4.2f}  [{', '.join(entry.sources)}] {entry.answer}")
    finally:
        node.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
