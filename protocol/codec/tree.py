"""Model objects to and from the plain tree (dicts, lists, scalars) shared by the YAML and JSON forms.

Field names are the spec's camelCase, absent optional fields are left out, unions carry a ``kind``
tag, enums are PascalCase strings, hashes canonical multibase, DIDs ``did:odf:...`` and timestamps
RFC 3339: the structure the reference writes with serde.
"""

from __future__ import annotations

from typing import Any

from protocol.codec._tree_generated import READERS, WRITERS
from protocol.codec.invalid import Invalid
from protocol.codec.tree_values import _r_int
from protocol.errors import DecodeError, EncodeError
from protocol.model import KIND_NAMES


def to_tree(value: object) -> Any:
    """The tree of any model object; a union variant is written with its ``kind`` tag."""
    writer = WRITERS.get(type(value))
    if writer is None:
        raise EncodeError(f"{type(value).__name__} is not a model type")
    try:
        tree = writer(value)
    except (AttributeError, TypeError, KeyError) as error:
        raise EncodeError(f"{type(value).__name__} is malformed: {error}") from None
    tag = KIND_NAMES.get(type(value))
    return {"kind": tag, **tree} if tag is not None else tree


def from_tree(tree: Any, type_name: str, where: str = "", prefix: str = "") -> Any:
    """Read a model object of the named type (a class or union name such as ``MetadataEvent``).

    Errors read ``<where>: <prefix>.<field path>: <reason>``; ``where`` names the file or document.
    """
    reader = READERS.get(type_name)
    if reader is None:
        raise DecodeError(f"{type_name} is not a model type")
    try:
        return reader(tree)
    except Invalid as error:
        raise DecodeError(_message(where, prefix, error)) from None
    except RecursionError:
        raise DecodeError(f"{where or type_name}: nesting is too deep") from None


def _message(where: str, prefix: str, error: Invalid) -> str:
    path = ".".join(p for p in (prefix, error.field_path()) if p).replace(".[", "[")
    return ": ".join(p for p in (where, path, error.reason) if p)


def read_manifest(tree: Any, kind: str, version: int, content_type: str, where: str = "") -> Any:
    """Check a ``{kind, version, content}`` manifest and read its content."""
    prefix = f"{where}: " if where else ""
    if not isinstance(tree, dict):
        raise DecodeError(f"{prefix}expected a manifest map with kind, version and content")
    unknown = sorted(str(k) for k in tree if k not in ("kind", "version", "content"))
    if unknown:
        raise DecodeError(
            f"{prefix}unknown manifest field `{unknown[0]}`, expected `kind`, `version`, `content`"
        )
    for required in ("kind", "version", "content"):
        if required not in tree:
            raise DecodeError(f"{prefix}manifest is missing field `{required}`")
    if tree["kind"] != kind:
        raise DecodeError(f"{prefix}manifest kind {tree['kind']!r} is not {kind!r}")
    try:
        found = _r_int(tree["version"], "int32")
    except Invalid as error:
        raise DecodeError(f"{prefix}version: {error.reason}") from None
    if found != version:
        raise DecodeError(
            f"{prefix}{kind} manifest version {found} is not supported (supported: {version})"
        )
    return from_tree(tree["content"], content_type, where, "content")


def manifest(kind: str, version: int, content: object) -> dict[str, Any]:
    return {"kind": kind, "version": version, "content": to_tree(content)}
