"""A real in-process EVM (eth-tester on py-evm) behind a small Ethereum JSON-RPC endpoint on loopback.

Contracts are deployed from hand-assembled bytecode (no Solidity compiler is available offline):
the *emitter* logs whatever a transaction asks it to, with the EVM's own ``LOG3`` opcode. Its
call data is ``topic0 ‖ topic1 ‖ topic2 ‖ data``; the runtime code is::

    PUSH1 0x40 CALLDATALOAD        ; topic2
    PUSH1 0x20 CALLDATALOAD        ; topic1
    PUSH1 0x00 CALLDATALOAD        ; topic0
    PUSH1 0x60 CALLDATASIZE SUB    ; length of the data (everything after the topics)
    DUP1 PUSH1 0x60 PUSH1 0x00 CALLDATACOPY   ; memory[0:length] = calldata[0x60:]
    PUSH1 0x00 LOG3                ; log memory[0:length] with the three topics
    STOP

and the deployment code copies it into place (``PUSH1 len DUP1 PUSH1 11 PUSH1 0 CODECOPY PUSH1 0
RETURN``). Each transaction is mined in a block of its own.

The endpoint answers ``eth_chainId``, ``eth_blockNumber``, ``eth_getBlockByNumber`` and
``eth_getLogs`` from the EVM's state; it can refuse ranges wider than ``max_range`` blocks (as
hosted nodes do) or misbehave (``broken``) to test how the fetcher copes.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from eth_abi import encode
from eth_tester import EthereumTester, PyEVMBackend

RUNTIME = bytes.fromhex("604035602035600035606036038060606000376000a300")
DEPLOY = bytes.fromhex(f"60{len(RUNTIME):02x}80600b6000396000f3") + RUNTIME


class EvmNode:
    def __init__(self) -> None:
        self.tester = EthereumTester(backend=PyEVMBackend())
        self.account = self.tester.get_accounts()[0]
        self.chain_id: int = self.tester.backend.chain.chain_id
        self.max_range: int | None = None
        self.broken: str | None = None
        """``error`` (a JSON-RPC error), ``html`` (not JSON) or ``bad log`` (a log without its
        block number) for every ``eth_getLogs``."""
        self.timestamps = True
        """Whether logs carry ``blockTimestamp`` (newer nodes send it, many still do not)."""
        self.ranges: list[tuple[int, int, bool]] = []
        """Each ``eth_getLogs`` range asked for, and whether it was answered."""
        self.url = ""

    def deploy(self) -> bytes:
        """Deploys an emitter; its address."""
        receipt = self._transact({"to": "", "data": "0x" + DEPLOY.hex()})
        return bytes.fromhex(receipt["contract_address"][2:])

    def emit(
        self, contract: bytes, topics: list[bytes], types: list[str], values: list[Any]
    ) -> int:
        """Has ``contract`` log the three ``topics`` and ``values`` ABI-encoded as ``types``; the
        block number of the transaction."""
        assert len(topics) == 3
        call = b"".join(topics) + encode(types, values)
        receipt = self._transact({"to": "0x" + contract.hex(), "data": "0x" + call.hex()})
        assert len(receipt["logs"]) == 1
        return int(receipt["block_number"])

    def mine(self, blocks: int) -> None:
        self.tester.mine_blocks(blocks)

    def latest(self) -> int:
        return int(self.tester.get_block_by_number("latest")["number"])

    def _transact(self, transaction: dict[str, Any]) -> Any:
        sent = self.tester.send_transaction(
            {"from": self.account, "gas": 500_000, "value": 0, **transaction}
        )
        return self.tester.get_transaction_receipt(sent)

    async def handle(self, request: web.Request) -> web.Response:
        call = await request.json()
        method, params = call["method"], call["params"]
        if method == "eth_getLogs" and self.broken == "html":
            return web.Response(text="<html><body>502 Bad Gateway</body></html>")
        try:
            result = self._answer(method, params)
        except _Refused as refused:
            error = {"code": refused.code, "message": refused.message}
            return web.json_response({"jsonrpc": "2.0", "id": call["id"], "error": error})
        return web.json_response({"jsonrpc": "2.0", "id": call["id"], "result": result})

    def _answer(self, method: str, params: list[Any]) -> Any:
        if method == "eth_chainId":
            return hex(self.chain_id)
        if method == "eth_blockNumber":
            return hex(self.latest())
        if method == "eth_getBlockByNumber":
            block = self.tester.get_block_by_number(int(params[0], 16))
            return {"number": hex(block["number"]), "hash": block["hash"]}
        if method == "eth_getLogs":
            return self._logs(params[0])
        raise _Refused(-32601, f"the method {method} does not exist")

    def _logs(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        first, last = int(query["fromBlock"], 16), int(query["toBlock"], 16)
        if self.broken == "error":
            self.ranges.append((first, last, False))
            raise _Refused(-32000, "internal error:\nstate unavailable")
        if self.max_range is not None and last - first + 1 > self.max_range:
            self.ranges.append((first, last, False))
            raise _Refused(-32005, f"query exceeds the limit of {self.max_range} blocks")
        self.ranges.append((first, last, True))
        found = self.tester.create_log_filter(
            from_block=first,
            to_block=last,
            address=query.get("address"),
            topics=query.get("topics"),
        )
        try:
            logs = self.tester.get_all_filter_logs(found)
        finally:
            self.tester.delete_filter(found)
        answer = [
            {
                "blockNumber": hex(log["block_number"]),
                "blockHash": log["block_hash"],
                "transactionIndex": hex(log["transaction_index"]),
                "transactionHash": log["transaction_hash"],
                "logIndex": hex(log["log_index"]),
                "address": log["address"].lower(),
                "topics": list(log["topics"]),
                "data": log["data"],
                "removed": False,
            }
            for log in logs
        ]
        if self.timestamps:
            for log in answer:
                block = self.tester.get_block_by_number(int(log["blockNumber"], 16))
                log["blockTimestamp"] = hex(block["timestamp"])
        if self.broken == "bad log":
            for log in answer:
                del log["blockNumber"]
        return answer


class _Refused(Exception):
    def __init__(self, code: int, message: str) -> None:
        self.code = code
        self.message = message
