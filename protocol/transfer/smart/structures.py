"""Structures shared by Smart Transfer Protocol messages: the transfer plan, the metadata
batch, object references and URLs, transfer phases and the error variants (``TransferError``),
in the reference's JSON wire form (see ``messages``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from protocol.errors import ParseError, ProtocolError
from protocol.identity import DatasetId, Multihash

PROTOCOL_VERSION = 1
VERSION_HEADER = "x-odf-smtp-version"
WEBSOCKET_PROTOCOL = "odf/smart-transfer-protocol/v1"
MEDIA_TAR_GZ = "application/tar+gzip"
ENCODING_RAW = "raw"
CLOSE_CODE_ERROR = 1011
"""The WebSocket close code whose reason carries a JSON error (as the reference sends it)."""

ObjectType = Literal["DataSlice", "Checkpoint"]
OBJECT_TYPES: tuple[ObjectType, ...] = ("DataSlice", "Checkpoint")


class MessageError(ProtocolError):
    """A message is not valid JSON or not of the expected shape."""


# --- field readers ------------------------------------------------------------------------------


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MessageError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


def _field(obj: dict[str, Any], name: str, where: str) -> Any:
    if name not in obj:
        raise MessageError(f"{where}.{name}: required field is missing")
    return obj[name]


def _int(obj: dict[str, Any], name: str, where: str, *, minimum: int = 0) -> int:
    value = _field(obj, name, where)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise MessageError(f"{where}.{name}: expected an integer >= {minimum}, got {value!r}")
    return value


def _bool(obj: dict[str, Any], name: str, where: str, default: bool | None = None) -> bool:
    if name not in obj and default is not None:
        return default
    value = _field(obj, name, where)
    if not isinstance(value, bool):
        raise MessageError(f"{where}.{name}: expected a boolean, got {value!r}")
    return value


def _str(obj: dict[str, Any], name: str, where: str) -> str:
    value = _field(obj, name, where)
    if not isinstance(value, str):
        raise MessageError(f"{where}.{name}: expected a string, got {value!r}")
    return value


def _hash(value: Any, where: str) -> Multihash:
    if not isinstance(value, str):
        raise MessageError(f"{where}: expected a multibase hash string, got {value!r}")
    try:
        return Multihash.from_multibase(value)
    except ParseError as err:
        raise MessageError(f"{where}: {err}") from None


def _opt_hash(obj: dict[str, Any], name: str, where: str) -> Multihash | None:
    value = obj.get(name)
    return None if value is None else _hash(value, f"{where}.{name}")


def _list(obj: dict[str, Any], name: str, where: str) -> list[Any]:
    value = _field(obj, name, where)
    if not isinstance(value, list):
        raise MessageError(f"{where}.{name}: expected an array")
    return value


def _text(hash: Multihash | None) -> str | None:
    return None if hash is None else hash.to_multibase()


def _empty(value: Any, where: str) -> None:
    if value is not None:
        _obj(value, where)


# --- shared structures --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TransferPlan:
    num_blocks: int
    num_objects: int
    num_records: int
    bytes_in_raw_blocks: int
    bytes_in_raw_objects: int

    def to_json(self) -> dict[str, Any]:
        return {
            "num_blocks": self.num_blocks,
            "num_objects": self.num_objects,
            "num_records": self.num_records,
            "bytes_in_raw_blocks": self.bytes_in_raw_blocks,
            "bytes_in_raw_objects": self.bytes_in_raw_objects,
        }

    @classmethod
    def from_json(cls, value: Any, where: str = "TransferPlan") -> TransferPlan:
        obj = _obj(value, where)
        return cls(
            *(
                _int(obj, name, where)
                for name in (
                    "num_blocks",
                    "num_objects",
                    "num_records",
                    "bytes_in_raw_blocks",
                    "bytes_in_raw_objects",
                )
            )
        )


_BYTE_CELLS = b"".join(f"{value},".encode().ljust(4, b"\0") for value in range(256))
"""Each byte value's text and a comma, padded with NULs to 4 bytes."""


def _byte_values_text(payload: bytes) -> str:
    """``",".join(str(b) for b in payload)`` as rows of a lookup table, the NULs dropped
    (1.25 M values: ~17 ms of CPU, ~47 ms joined value by value)."""
    import numpy as np  # here: modules that only read messages need not load numpy to start

    if not payload:
        return ""
    cells = np.frombuffer(_BYTE_CELLS, np.uint8).reshape(256, 4)
    text = cells[np.frombuffer(payload, np.uint8)].ravel()
    written: bytes = text[text != 0].tobytes()
    return written[:-1].decode("ascii")


@dataclass(frozen=True, slots=True)
class MetadataBlocksBatch:
    """A gzipped tarball of blocks (see ``tarball``) carried inline as a byte array."""

    num_blocks: int
    payload: bytes
    media_type: str = MEDIA_TAR_GZ
    encoding: str = ENCODING_RAW

    def to_json(self) -> dict[str, Any]:
        return {
            "num_blocks": self.num_blocks,
            "media_type": self.media_type,
            "encoding": self.encoding,
            "payload": list(self.payload),
        }

    def to_json_text(self) -> str:
        """``to_json()`` as compact JSON text, the same characters as ``json.dumps`` writes but in
        a sixth of its time: the payload's byte values are looked up, not formatted one by one
        (a 10,000-block tarball is over a million of them: ``_byte_values_text``)."""
        head = json.dumps(
            {
                "num_blocks": self.num_blocks,
                "media_type": self.media_type,
                "encoding": self.encoding,
            },
            separators=(",", ":"),
        )
        return head[:-1] + ',"payload":[' + _byte_values_text(self.payload) + "]}"

    @classmethod
    def from_json(cls, value: Any, where: str = "MetadataBlocksBatch") -> MetadataBlocksBatch:
        obj = _obj(value, where)
        payload = _list(obj, "payload", where)
        try:
            data = bytes(payload)
        except (TypeError, ValueError):
            raise MessageError(f"{where}.payload: expected an array of byte values 0-255") from None
        return cls(
            num_blocks=_int(obj, "num_blocks", where),
            payload=data,
            media_type=_str(obj, "media_type", where),
            encoding=_str(obj, "encoding", where),
        )


@dataclass(frozen=True, slots=True)
class ObjectFileReference:
    object_type: ObjectType
    physical_hash: Multihash
    size: int

    def to_json(self) -> dict[str, Any]:
        return {
            "object_type": self.object_type,
            "physical_hash": self.physical_hash.to_multibase(),
            "size": self.size,
        }

    @classmethod
    def from_json(cls, value: Any, where: str = "ObjectFileReference") -> ObjectFileReference:
        obj = _obj(value, where)
        kind = _field(obj, "object_type", where)
        if kind not in OBJECT_TYPES:
            raise MessageError(f"{where}.object_type: expected one of {OBJECT_TYPES}, got {kind!r}")
        return cls(
            kind,
            _hash(_field(obj, "physical_hash", where), f"{where}.physical_hash"),
            _int(obj, "size", where),
        )


@dataclass(frozen=True, slots=True)
class TransferUrl:
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    expires_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        expires = None
        if self.expires_at is not None:
            expires = self.expires_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {
            "url": self.url,
            "headers": [{"name": n, "value": v} for n, v in self.headers],
            "expires_at": expires,
        }

    @classmethod
    def from_json(cls, value: Any, where: str = "TransferUrl") -> TransferUrl:
        obj = _obj(value, where)
        headers = []
        for i, row in enumerate(obj.get("headers") or []):
            row = _obj(row, f"{where}.headers[{i}]")
            headers.append(
                (
                    _str(row, "name", f"{where}.headers[{i}]"),
                    _str(row, "value", f"{where}.headers[{i}]"),
                )
            )
        expires = obj.get("expires_at")
        expires_at = None
        if expires is not None:
            try:
                expires_at = datetime.fromisoformat(expires)
            except (TypeError, ValueError):
                raise MessageError(
                    f"{where}.expires_at: not an RFC 3339 time: {expires!r}"
                ) from None
        return cls(_str(obj, "url", where), tuple(headers), expires_at)


@dataclass(frozen=True, slots=True)
class TransferPhase:
    """Where a transfer failed, e.g. ``{"Pull": "InitialRequest"}``."""

    direction: Literal["Pull", "Push"]
    phase: str

    def to_json(self) -> dict[str, Any]:
        return {self.direction: self.phase}

    @classmethod
    def from_json(cls, value: Any, where: str = "phase") -> TransferPhase:
        obj = _obj(value, where)
        if (
            len(obj) != 1
            or next(iter(obj)) not in ("Pull", "Push")
            or not isinstance(next(iter(obj.values())), str)
        ):
            raise MessageError(f'{where}: expected {{"Pull"|"Push": "<phase>"}}, got {obj!r}')
        ((direction, phase),) = obj.items()
        return cls("Pull" if direction == "Pull" else "Push", phase)

    def __str__(self) -> str:
        return f"{self.direction} phase {self.phase}"


# --- errors (the Err side of every Result) ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TransferError:
    """An ``Err`` variant: ``kind`` is its name (``Internal``, ``InvalidInterval``,
    ``InvalidHead``, ``SeedBlockOverwriteRestricted``, ``RefCollision``, ``NameCollision``)."""

    kind: str
    phase: TransferPhase | None = None
    message: str = ""
    head: Multihash | None = None
    """``InvalidInterval``: the server's head; ``InvalidHead``: the head the client assumed."""
    tail: Multihash | None = None
    """``InvalidInterval``: the client's head; ``InvalidHead``: the server's actual head."""
    dataset_id: DatasetId | None = None
    dataset_alias: str | None = None

    KINDS: ClassVar[tuple[str, ...]] = (
        "Internal",
        "InvalidInterval",
        "InvalidHead",
        "SeedBlockOverwriteRestricted",
        "RefCollision",
        "NameCollision",
    )

    def to_json(self) -> dict[str, Any]:
        match self.kind:
            case "Internal":
                assert self.phase is not None  # constructed by ``internal``
                body: dict[str, Any] = {
                    "phase": self.phase.to_json(),
                    "error_message": self.message,
                }
            case "InvalidInterval":
                body = {"head": _text(self.head), "tail": _text(self.tail)}
            case "InvalidHead":
                body = {"actual_head": _text(self.head), "expected_head": _text(self.tail)}
            case "RefCollision":
                body = {"dataset_id": str(self.dataset_id)}
            case "NameCollision":
                body = {"dataset_alias": self.dataset_alias}
            case _:
                body = {}
        return {"Err": {self.kind: body}}

    @classmethod
    def internal(
        cls, direction: Literal["Pull", "Push"], phase: str, message: str
    ) -> TransferError:
        return cls("Internal", TransferPhase(direction, phase), message)

    @classmethod
    def from_variant(cls, value: Any, where: str) -> TransferError:
        obj = _obj(value, where)
        if len(obj) != 1 or next(iter(obj)) not in cls.KINDS:
            raise MessageError(f"{where}: expected one of {cls.KINDS}, got {list(obj)}")
        ((kind, body),) = obj.items()
        inner = f"{where}.{kind}"
        body = _obj(body, inner)
        match kind:
            case "Internal":
                return cls(
                    kind,
                    TransferPhase.from_json(_field(body, "phase", inner), f"{inner}.phase"),
                    _str(body, "error_message", inner),
                )
            case "InvalidInterval":
                return cls(
                    kind, head=_opt_hash(body, "head", inner), tail=_opt_hash(body, "tail", inner)
                )
            case "InvalidHead":
                return cls(
                    kind,
                    head=_opt_hash(body, "actual_head", inner),
                    tail=_opt_hash(body, "expected_head", inner),
                )
            case "RefCollision":
                try:
                    return cls(kind, dataset_id=DatasetId.parse(_str(body, "dataset_id", inner)))
                except ParseError as err:
                    raise MessageError(f"{inner}.dataset_id: {err}") from None
            case "NameCollision":
                return cls(kind, dataset_alias=_str(body, "dataset_alias", inner))
        return cls(kind)

    def describe(self) -> str:
        match self.kind:
            case "Internal":
                return f"server error during {self.phase}: {self.message}"
            case "InvalidInterval":
                return (
                    f"the remote head {self.head} does not descend from the local head "
                    f"{self.tail}: the histories diverged"
                )
            case "InvalidHead":
                return (
                    f"the remote head is {self.tail or '<none>'}, not {self.head or '<none>'} "
                    "as this push assumed: the histories diverged"
                )
            case "SeedBlockOverwriteRestricted":
                return "the remote refuses to replace a dataset's seed block (a different dataset)"
            case "RefCollision":
                return f"the remote already holds dataset {self.dataset_id} under another name"
            case "NameCollision":
                return f"the remote already has a different dataset named {self.dataset_alias}"
        return self.kind


def _result(value: Any, where: str) -> tuple[Any, TransferError | None]:
    """Split ``{"Ok": x}`` / ``{"Err": e}``."""
    obj = _obj(value, where)
    if "Ok" in obj and len(obj) == 1:
        return obj["Ok"], None
    if "Err" in obj and len(obj) == 1:
        return None, TransferError.from_variant(obj["Err"], f"{where}.Err")
    raise MessageError(f'{where}: expected {{"Ok": …}} or {{"Err": …}}, got keys {list(obj)}')
