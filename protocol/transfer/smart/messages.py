"""Smart Transfer Protocol messages (RFC-008) in the JSON form the reference exchanges.

The AsyncAPI file names the flow; the wire form is what kamu-cli's serde derives produce, so its
client and server understand ours: field names in snake_case, ``Result`` as ``{"Ok": …}`` /
``{"Err": {"<Variant>": …}}``, unit variants as bare strings (``"HttpDownload"``,
``"Complete"``), hashes as multibase strings, the metadata tarball as a JSON array of byte
values, ``Option`` fields as ``null``. Every message is a frozen dataclass with ``to_json()``
(a JSON-ready value) and ``from_json(value)`` that validates and raises ``MessageError`` naming
the message and field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from protocol.identity import Multihash
from protocol.transfer.smart.structures import (
    CLOSE_CODE_ERROR,
    ENCODING_RAW,
    MEDIA_TAR_GZ,
    OBJECT_TYPES,
    PROTOCOL_VERSION,
    VERSION_HEADER,
    WEBSOCKET_PROTOCOL,
    MessageError,
    MetadataBlocksBatch,
    ObjectFileReference,
    ObjectType,
    TransferError,
    TransferPhase,
    TransferPlan,
    TransferUrl,
    _bool,
    _empty,
    _field,
    _int,
    _list,
    _obj,
    _opt_hash,
    _result,
    _text,
)

__all__ = [
    "CLOSE_CODE_ERROR",
    "ENCODING_RAW",
    "MEDIA_TAR_GZ",
    "OBJECT_TYPES",
    "PROTOCOL_VERSION",
    "VERSION_HEADER",
    "WEBSOCKET_PROTOCOL",
    "MessageError",
    "MetadataBlocksBatch",
    "ObjectFileReference",
    "ObjectType",
    "TransferError",
    "TransferPhase",
    "TransferPlan",
    "TransferUrl",
]

# --- messages -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DatasetPullRequest:
    begin_after: Multihash | None = None
    stop_at: Multihash | None = None
    force_update_if_diverged: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "begin_after": _text(self.begin_after),
            "stop_at": _text(self.stop_at),
            "force_update_if_diverged": self.force_update_if_diverged,
        }

    @classmethod
    def from_json(cls, value: Any) -> DatasetPullRequest:
        where = "DatasetPullRequest"
        obj = _obj(value, where)
        return cls(
            _opt_hash(obj, "begin_after", where),
            _opt_hash(obj, "stop_at", where),
            _bool(obj, "force_update_if_diverged", where, default=False),
        )


@dataclass(frozen=True, slots=True)
class DatasetPullResponse:
    """``Result<DatasetPullSuccessResponse, DatasetPullRequestError>``."""

    transfer_plan: TransferPlan | None = None
    error: TransferError | None = None

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return self.error.to_json()
        assert self.transfer_plan is not None  # either a plan or an error
        return {"Ok": {"transfer_plan": self.transfer_plan.to_json()}}

    @classmethod
    def from_json(cls, value: Any) -> DatasetPullResponse:
        ok, error = _result(value, "DatasetPullResponse")
        if error is not None:
            return cls(error=error)
        obj = _obj(ok, "DatasetPullResponse.Ok")
        return cls(
            TransferPlan.from_json(
                _field(obj, "transfer_plan", "DatasetPullResponse.Ok"),
                "DatasetPullResponse.Ok.transfer_plan",
            )
        )


@dataclass(frozen=True, slots=True)
class DatasetPullMetadataRequest:
    def to_json(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_json(cls, value: Any) -> DatasetPullMetadataRequest:
        _empty(value, "DatasetPullMetadataRequest")
        return cls()


@dataclass(frozen=True, slots=True)
class DatasetMetadataPullResponse:
    blocks: MetadataBlocksBatch

    def to_json(self) -> dict[str, Any]:
        return {"blocks": self.blocks.to_json()}

    def to_json_text(self) -> str:
        return '{"blocks":' + self.blocks.to_json_text() + "}"

    @classmethod
    def from_json(cls, value: Any) -> DatasetMetadataPullResponse:
        where = "DatasetMetadataPullResponse"
        obj = _obj(value, where)
        return cls(MetadataBlocksBatch.from_json(_field(obj, "blocks", where), f"{where}.blocks"))


def _object_files(obj: dict[str, Any], where: str) -> tuple[ObjectFileReference, ...]:
    return tuple(
        ObjectFileReference.from_json(item, f"{where}.object_files[{i}]")
        for i, item in enumerate(_list(obj, "object_files", where))
    )


@dataclass(frozen=True, slots=True)
class DatasetPullObjectsTransferRequest:
    object_files: tuple[ObjectFileReference, ...]

    def to_json(self) -> dict[str, Any]:
        return {"object_files": [f.to_json() for f in self.object_files]}

    @classmethod
    def from_json(cls, value: Any) -> DatasetPullObjectsTransferRequest:
        where = "DatasetPullObjectsTransferRequest"
        return cls(_object_files(_obj(value, where), where))


@dataclass(frozen=True, slots=True)
class PullObjectTransferStrategy:
    object_file: ObjectFileReference
    download_from: TransferUrl
    pull_strategy: str = "HttpDownload"

    def to_json(self) -> dict[str, Any]:
        return {
            "object_file": self.object_file.to_json(),
            "pull_strategy": self.pull_strategy,
            "download_from": self.download_from.to_json(),
        }

    @classmethod
    def from_json(cls, value: Any, where: str) -> PullObjectTransferStrategy:
        obj = _obj(value, where)
        strategy = _field(obj, "pull_strategy", where)
        if strategy != "HttpDownload":
            raise MessageError(f"{where}.pull_strategy: unsupported strategy {strategy!r}")
        return cls(
            ObjectFileReference.from_json(
                _field(obj, "object_file", where), f"{where}.object_file"
            ),
            TransferUrl.from_json(_field(obj, "download_from", where), f"{where}.download_from"),
            strategy,
        )


@dataclass(frozen=True, slots=True)
class DatasetPullObjectsTransferResponse:
    object_transfer_strategies: tuple[PullObjectTransferStrategy, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "object_transfer_strategies": [s.to_json() for s in self.object_transfer_strategies]
        }

    @classmethod
    def from_json(cls, value: Any) -> DatasetPullObjectsTransferResponse:
        where = "DatasetPullObjectsTransferResponse"
        items = _list(_obj(value, where), "object_transfer_strategies", where)
        return cls(
            tuple(
                PullObjectTransferStrategy.from_json(s, f"{where}.object_transfer_strategies[{i}]")
                for i, s in enumerate(items)
            )
        )


@dataclass(frozen=True, slots=True)
class DatasetPushRequest:
    current_head: Multihash | None
    transfer_plan: TransferPlan
    force_update_if_diverged: bool = False
    visibility_for_created_dataset: str = "Private"

    def to_json(self) -> dict[str, Any]:
        return {
            "current_head": _text(self.current_head),
            "transfer_plan": self.transfer_plan.to_json(),
            "force_update_if_diverged": self.force_update_if_diverged,
            "visibility_for_created_dataset": self.visibility_for_created_dataset,
        }

    @classmethod
    def from_json(cls, value: Any) -> DatasetPushRequest:
        where = "DatasetPushRequest"
        obj = _obj(value, where)
        visibility = obj.get("visibility_for_created_dataset", "Private")
        if visibility not in ("Private", "Public", "private", "public"):
            raise MessageError(
                f"{where}.visibility_for_created_dataset: unknown value {visibility!r}"
            )
        return cls(
            _opt_hash(obj, "current_head", where),
            TransferPlan.from_json(_field(obj, "transfer_plan", where), f"{where}.transfer_plan"),
            _bool(obj, "force_update_if_diverged", where, default=False),
            visibility.capitalize(),
        )


@dataclass(frozen=True, slots=True)
class Accepted:
    """An ``Ok`` carrying an empty struct: ``DatasetPushRequestAccepted``,
    ``DatasetPushMetadataAccepted``; or its error."""

    error: TransferError | None = None

    def to_json(self) -> dict[str, Any]:
        return self.error.to_json() if self.error is not None else {"Ok": {}}

    @classmethod
    def from_json(cls, value: Any, where: str = "response") -> Accepted:
        ok, error = _result(value, where)
        if error is None:
            _empty(ok, f"{where}.Ok")
        return cls(error)


@dataclass(frozen=True, slots=True)
class DatasetPushMetadataRequest:
    new_blocks: MetadataBlocksBatch

    def to_json(self) -> dict[str, Any]:
        return {"new_blocks": self.new_blocks.to_json()}

    def to_json_text(self) -> str:
        return '{"new_blocks":' + self.new_blocks.to_json_text() + "}"

    @classmethod
    def from_json(cls, value: Any) -> DatasetPushMetadataRequest:
        where = "DatasetPushMetadataRequest"
        obj = _obj(value, where)
        return cls(
            MetadataBlocksBatch.from_json(_field(obj, "new_blocks", where), f"{where}.new_blocks")
        )


@dataclass(frozen=True, slots=True)
class DatasetPushObjectsTransferRequest:
    object_files: tuple[ObjectFileReference, ...]
    is_truncated: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "object_files": [f.to_json() for f in self.object_files],
            "is_truncated": self.is_truncated,
        }

    @classmethod
    def from_json(cls, value: Any) -> DatasetPushObjectsTransferRequest:
        where = "DatasetPushObjectsTransferRequest"
        obj = _obj(value, where)
        return cls(_object_files(obj, where), _bool(obj, "is_truncated", where, default=False))


@dataclass(frozen=True, slots=True)
class PushObjectTransferStrategy:
    object_file: ObjectFileReference
    push_strategy: Literal["SkipUpload", "HttpUpload"]
    upload_to: TransferUrl | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "object_file": self.object_file.to_json(),
            "push_strategy": self.push_strategy,
            "upload_to": None if self.upload_to is None else self.upload_to.to_json(),
        }

    @classmethod
    def from_json(cls, value: Any, where: str) -> PushObjectTransferStrategy:
        obj = _obj(value, where)
        strategy = _field(obj, "push_strategy", where)
        if strategy not in ("SkipUpload", "HttpUpload"):
            raise MessageError(f"{where}.push_strategy: unsupported strategy {strategy!r}")
        upload = obj.get("upload_to")
        if strategy == "HttpUpload" and upload is None:
            raise MessageError(f"{where}.upload_to: required for HttpUpload")
        return cls(
            ObjectFileReference.from_json(
                _field(obj, "object_file", where), f"{where}.object_file"
            ),
            strategy,
            None if upload is None else TransferUrl.from_json(upload, f"{where}.upload_to"),
        )


@dataclass(frozen=True, slots=True)
class DatasetPushObjectsTransferResponse:
    """``Result<DatasetPushObjectsTransferAccepted, DatasetPushObjectsTransferError>``."""

    object_transfer_strategies: tuple[PushObjectTransferStrategy, ...] = ()
    error: TransferError | None = None

    def to_json(self) -> dict[str, Any]:
        if self.error is not None:
            return self.error.to_json()
        return {
            "Ok": {
                "object_transfer_strategies": [s.to_json() for s in self.object_transfer_strategies]
            }
        }

    @classmethod
    def from_json(cls, value: Any) -> DatasetPushObjectsTransferResponse:
        where = "DatasetPushObjectsTransferResponse"
        ok, error = _result(value, where)
        if error is not None:
            return cls(error=error)
        items = _list(_obj(ok, f"{where}.Ok"), "object_transfer_strategies", f"{where}.Ok")
        return cls(
            tuple(
                PushObjectTransferStrategy.from_json(
                    s, f"{where}.Ok.object_transfer_strategies[{i}]"
                )
                for i, s in enumerate(items)
            )
        )


@dataclass(frozen=True, slots=True)
class DatasetPushObjectsUploadProgressRequest:
    def to_json(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_json(cls, value: Any) -> DatasetPushObjectsUploadProgressRequest:
        _empty(value, "DatasetPushObjectsUploadProgressRequest")
        return cls()


@dataclass(frozen=True, slots=True)
class DatasetPushObjectsUploadProgressResponse:
    """``{"details": "Complete"}`` or ``{"details": {"Running": {"uploaded_objects_count": n}}}``."""

    uploaded_objects_count: int | None = None
    """``None`` once the upload is complete."""

    def to_json(self) -> dict[str, Any]:
        if self.uploaded_objects_count is None:
            return {"details": "Complete"}
        return {"details": {"Running": {"uploaded_objects_count": self.uploaded_objects_count}}}

    @classmethod
    def from_json(cls, value: Any) -> DatasetPushObjectsUploadProgressResponse:
        where = "DatasetPushObjectsUploadProgressResponse"
        details = _field(_obj(value, where), "details", where)
        if details == "Complete":
            return cls()
        running = _field(_obj(details, f"{where}.details"), "Running", f"{where}.details")
        return cls(
            _int(
                _obj(running, f"{where}.details.Running"),
                "uploaded_objects_count",
                f"{where}.details.Running",
            )
        )

    @property
    def complete(self) -> bool:
        return self.uploaded_objects_count is None


@dataclass(frozen=True, slots=True)
class DatasetPushComplete:
    def to_json(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_json(cls, value: Any) -> DatasetPushComplete:
        _empty(value, "DatasetPushComplete")
        return cls()


@dataclass(frozen=True, slots=True)
class DatasetPushCompleteConfirmed:
    def to_json(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_json(cls, value: Any) -> DatasetPushCompleteConfirmed:
        _empty(value, "DatasetPushCompleteConfirmed")
        return cls()


# --- text framing -------------------------------------------------------------------------------


def encode(message: Any) -> str:
    """A message as the compact JSON text of one WebSocket frame (a message carrying a metadata
    tarball writes its own text, faster than ``json.dumps``, character for character the same)."""
    if isinstance(message, (DatasetMetadataPullResponse, DatasetPushMetadataRequest)):
        return message.to_json_text()
    return json.dumps(message.to_json(), separators=(",", ":"))


def decode_json(text: str | bytes, what: str) -> Any:
    try:
        return json.loads(text)
    except (UnicodeDecodeError, ValueError) as err:
        raise MessageError(f"{what}: not valid JSON: {err}") from None


def decode_error(text: str) -> TransferError | None:
    """The error carried by a close frame's reason (the reference sends ``{"Err": …}`` there),
    or ``None`` when the reason is not such an error."""
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, dict) and set(value) == {"Err"}:
        try:
            return TransferError.from_variant(value["Err"], "close reason.Err")
        except MessageError:
            return None
    return None
