"""The few Ethereum JSON-RPC calls a logs source needs, over HTTP; blocking.

Every failure is a ``FetchError`` naming the node (scheme, host and port only: a node URL's path
or query often holds an API key) and the call; a JSON-RPC error answer is an ``RpcError`` that
keeps the node's code, so callers can tell a range the node refuses from other errors.
"""

from __future__ import annotations

import itertools
import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from odfd.ingest.errors import FetchError
from odfd.ingest.ethereum.logs import RawLog, data_bytes, parse_log, quantity

TIMEOUT_SECONDS = 60
METHOD_NOT_FOUND = -32601
_MAX_ANSWER = 256 << 20


class RpcError(FetchError):
    """The node answered a call with a JSON-RPC error."""

    def __init__(self, message: str, code: int | None) -> None:
        super().__init__(message)
        self.code = code


def shown(url: str) -> str:
    """The node's URL without what may be secret (user info, path, query)."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")


@dataclass
class EthRpc:
    url: str
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def call(self, method: str, *params: Any) -> Any:
        where = f"fetch.nodeUrl: {shown(self.url)}: {method}"
        body = json.dumps(
            {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": list(params)}
        ).encode()
        request = urllib.request.Request(
            self.url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                raw = response.read(_MAX_ANSWER)
        except urllib.error.HTTPError as err:
            raw = err.read(_MAX_ANSWER)  # nodes also send JSON-RPC errors with HTTP 4xx/5xx
            if not _is_rpc_error(raw):
                raise FetchError(f"{where} failed: HTTP {err.code} {err.reason}") from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise FetchError(f"{where}: the node is unreachable: {reason}") from None
        try:
            answer = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise FetchError(
                f"{where}: the answer is not JSON: {raw[:80].decode(errors='replace')!r}"
            ) from None
        if not isinstance(answer, dict) or ("result" not in answer and "error" not in answer):
            raise FetchError(
                f"{where}: the answer is not a JSON-RPC response: {str(answer)[:80]!r}"
            )
        error = answer.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else error
            raise RpcError(
                f"{where} failed: {' '.join(str(message).split())[:300]} (code {code})",
                code if isinstance(code, int) else None,
            )
        return answer["result"]

    def chain_id(self) -> int:
        return quantity(self.call("eth_chainId"), f"fetch.nodeUrl: {shown(self.url)}: eth_chainId")

    def block_number(self) -> int:
        where = f"fetch.nodeUrl: {shown(self.url)}: eth_blockNumber"
        return quantity(self.call("eth_blockNumber"), where)

    def block_hash(self, number: int) -> bytes:
        where = f"fetch.nodeUrl: {shown(self.url)}: eth_getBlockByNumber({number})"
        block = self.call("eth_getBlockByNumber", hex(number), False)
        if not isinstance(block, dict):
            raise FetchError(f"{where}: the node has no such block")
        return data_bytes(block.get("hash"), f"{where}: hash", 32)

    def get_logs(self, params: dict[str, Any]) -> list[RawLog]:
        where = f"fetch.nodeUrl: {shown(self.url)}: eth_getLogs"
        logs = self.call("eth_getLogs", params)
        if not isinstance(logs, list):
            raise FetchError(f"{where}: the answer is not a list of logs: {str(logs)[:80]!r}")
        return [parse_log(log, where) for log in logs]


def _is_rpc_error(raw: bytes) -> bool:
    try:
        answer = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(answer, dict) and "error" in answer
