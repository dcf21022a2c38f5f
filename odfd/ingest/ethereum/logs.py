"""Ethereum logs as rows: the node's JSON log objects, the event signature, and the Arrow table.

The columns are the reference's (kamu-cli through ``datafusion-ethers``): ``block_number``,
``block_hash``, ``block_timestamp`` (seconds, null when the node does not send it),
``transaction_index``, ``transaction_hash``, ``log_index``, ``address``, ``topic0`` ..
``topic3``, ``data``; with a signature, a struct column ``event`` holds the decoded parameters,
indexed ones first, then the others, each typed as the reference types it (``bool``,
``int32``/``int64``, ``uint32``/``uint64``, 128- and 256-bit integers as decimal text,
``address`` and ``bytes`` as binary, ``string`` as text). The three position columns are Int64
where the reference has UInt64: Spark, which reads the file, has no unsigned 64-bit type.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pyarrow as pa

from odfd.ingest.errors import BadInputError, FetchError, UnsupportedError

#: Solidity types the reference turns into columns, and the Arrow type of each.
_ARROW_TYPES: dict[str, pa.DataType] = {
    "bool": pa.bool_(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "int128": pa.string(),
    "int256": pa.string(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "uint128": pa.string(),
    "uint256": pa.string(),
    "address": pa.binary(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_ALIASES = {"uint": "uint256", "int": "int256"}
_PARAM = re.compile(r"^(?P<type>[A-Za-z0-9_\[\]]+)(?P<indexed>\s+indexed)?(?:\s+(?P<name>\w+))?$")
_SIGNATURE = re.compile(r"^(?:event\s+)?(?P<name>[A-Za-z_]\w*)\s*\((?P<params>.*)\)\s*$", re.S)


@dataclass(frozen=True, slots=True)
class EventParam:
    name: str
    type: str
    indexed: bool


@dataclass(frozen=True)
class EventSignature:
    """A Solidity event declaration, e.g. ``Transfer(address indexed from, address indexed to,
    uint256 value)``."""

    name: str
    params: tuple[EventParam, ...]

    @cached_property
    def selector(self) -> bytes:
        """``topic0`` of the event's logs: the Keccak-256 hash of its canonical declaration."""
        from eth_utils import keccak  # on first use: eth-utils takes a second to import

        return keccak(text=f"{self.name}({','.join(p.type for p in self.params)})")

    @property
    def columns(self) -> tuple[EventParam, ...]:
        """The parameters in the order of the ``event`` struct: indexed first."""
        return tuple(p for p in self.params if p.indexed) + tuple(
            p for p in self.params if not p.indexed
        )

    def check_decodable(self, where: str) -> None:
        """Refuses parameters the reference cannot turn into columns."""
        for param in self.params:
            if param.type not in _ARROW_TYPES:
                raise UnsupportedError(
                    f"{where}: parameter {param.name} has type {param.type}, which odfd (like "
                    f"the reference) does not decode; supported: {', '.join(_ARROW_TYPES)}"
                )
            if param.indexed and param.type in ("bytes", "string"):
                raise UnsupportedError(
                    f"{where}: parameter {param.name} is an indexed {param.type}: "
                    "logs hold only its hash"
                )


def parse_signature(text: str, where: str) -> EventSignature:
    """Parses an event declaration like ``Name(type [indexed] name, ...)``; newlines are spaces."""
    match = _SIGNATURE.match(" ".join(text.split()))
    if match is None:
        raise UnsupportedError(
            f"{where}: {text.strip()[:100]!r} is not an event declaration like Name(type name, ...)"
        )
    params: list[EventParam] = []
    body = match["params"].strip()
    for number, part in enumerate(body.split(",") if body else [], start=1):
        found = _PARAM.match(part.strip())
        if found is None or not found["name"]:
            raise UnsupportedError(
                f"{where}: parameter {number} ({part.strip()!r}) needs a type and a name"
            )
        kind = _ALIASES.get(found["type"], found["type"])
        params.append(EventParam(found["name"], kind, bool(found["indexed"])))
    return EventSignature(match["name"], tuple(params))


@dataclass(frozen=True, slots=True)
class RawLog:
    block_number: int
    block_hash: bytes
    block_timestamp: int | None
    transaction_index: int
    transaction_hash: bytes
    log_index: int
    address: bytes
    topics: tuple[bytes, ...]
    data: bytes


def parse_log(value: Any, where: str) -> RawLog:
    """A log object of an ``eth_getLogs`` answer; anything malformed is a ``FetchError``."""
    if not isinstance(value, dict):
        raise FetchError(f"{where}: a log is not a JSON object: {str(value)[:100]!r}")
    topics = value.get("topics")
    if not isinstance(topics, list) or len(topics) > 4:
        raise FetchError(f"{where}: a log has no list of at most 4 topics: {topics!r}"[:300])
    timestamp = value.get("blockTimestamp")
    return RawLog(
        block_number=quantity(value.get("blockNumber"), f"{where}: log blockNumber"),
        block_hash=data_bytes(value.get("blockHash"), f"{where}: log blockHash", 32),
        block_timestamp=None
        if timestamp is None
        else quantity(timestamp, f"{where}: log blockTimestamp"),
        transaction_index=quantity(value.get("transactionIndex"), f"{where}: log transactionIndex"),
        transaction_hash=data_bytes(
            value.get("transactionHash"), f"{where}: log transactionHash", 32
        ),
        log_index=quantity(value.get("logIndex"), f"{where}: log logIndex"),
        address=data_bytes(value.get("address"), f"{where}: log address", 20),
        topics=tuple(data_bytes(t, f"{where}: log topic", 32) for t in topics),
        data=data_bytes(value.get("data"), f"{where}: log data"),
    )


def quantity(value: Any, what: str) -> int:
    """A JSON-RPC quantity (``0x``-prefixed hex) as an int."""
    if isinstance(value, str) and value.startswith("0x") and len(value) > 2:
        try:
            return int(value, 16)
        except ValueError:
            pass
    raise FetchError(f"{what} is not a hex quantity: {str(value)[:80]!r}")


def data_bytes(value: Any, what: str, size: int | None = None) -> bytes:
    """JSON-RPC data (``0x``-prefixed hex) as bytes, of ``size`` bytes when given."""
    if isinstance(value, str) and value.startswith("0x"):
        try:
            raw = bytes.fromhex(value[2:])
        except ValueError:
            raw = None
        if raw is not None and (size is None or len(raw) == size):
            return raw
    expected = f"{size} bytes of hex" if size else "hex data"
    raise FetchError(f"{what} is not {expected}: {str(value)[:80]!r}")


def logs_table(logs: Sequence[RawLog], event: EventSignature | None) -> pa.Table:
    """The logs as the reference's columns (see the module's docstring)."""

    def column(name: str, kind: pa.DataType, values: list[Any], nullable: bool = False) -> None:
        fields.append(pa.field(name, kind, nullable=nullable))
        arrays.append(pa.array(values, kind))

    fields: list[pa.Field] = []
    arrays: list[pa.Array] = []
    column("block_number", pa.int64(), [log.block_number for log in logs])
    column("block_hash", pa.binary(), [log.block_hash for log in logs])
    column(
        "block_timestamp",
        pa.timestamp("s", tz="UTC"),
        [log.block_timestamp for log in logs],
        nullable=True,
    )
    column("transaction_index", pa.int64(), [log.transaction_index for log in logs])
    column("transaction_hash", pa.binary(), [log.transaction_hash for log in logs])
    column("log_index", pa.int64(), [log.log_index for log in logs])
    column("address", pa.binary(), [log.address for log in logs])
    for n in range(4):
        topic = [log.topics[n] if len(log.topics) > n else None for log in logs]
        column(f"topic{n}", pa.binary(), topic, nullable=True)
    column("data", pa.binary(), [log.data for log in logs])
    if event is not None:
        struct = pa.struct(
            [pa.field(p.name, _ARROW_TYPES[p.type], nullable=False) for p in event.columns]
        )
        column("event", struct, [_decode(log, event) for log in logs])
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def _decode(log: RawLog, event: EventSignature) -> dict[str, Any]:
    import eth_abi  # on first use: it takes a second to import
    from eth_abi.exceptions import DecodingError

    where = f"block {log.block_number}, log {log.log_index}"
    indexed = [p for p in event.params if p.indexed]
    if len(log.topics) != len(indexed) + 1:
        raise BadInputError(
            f"{where}: has {len(log.topics)} topics where {event.name} has {len(indexed) + 1}"
        )
    try:
        values = [
            eth_abi.decode([p.type], topic)[0]
            for p, topic in zip(indexed, log.topics[1:], strict=True)
        ]
        values += eth_abi.decode([p.type for p in event.params if not p.indexed], log.data)
    except (DecodingError, OverflowError, ValueError) as err:
        raise BadInputError(
            f"{where}: data does not decode as {event.name}: {err}".replace("\n", " ")
        ) from None
    return {p.name: _cell(p.type, v) for p, v in zip(event.columns, values, strict=True)}


def _cell(kind: str, value: Any) -> Any:
    if kind == "address":
        return bytes.fromhex(value[2:])
    if pa.types.is_string(_ARROW_TYPES[kind]) and isinstance(value, int):
        return str(value)
    return value
