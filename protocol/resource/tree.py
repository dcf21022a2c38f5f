"""Reading and writing the plain tree (what YAML/JSON parse into) of resource parts.

Readers raise ``Invalid`` carrying the field path, which the codec turns into a ``ResourceError``
naming the document and path (``headers.account.did: …``). Writers return dicts whose key order
is the order the reference's serde structs write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, TypeVar

from protocol.codec.invalid import Invalid
from protocol.codec.tree_values import _is_null, _parsed, _r_int, _r_json, _r_str, _w_json, describe
from protocol.errors import OdfError
from protocol.identity import AccountName
from protocol.model import JsonValue, Timestamp
from protocol.model.resource import AccountHandle, AccountRef, ResourceRef, TypeRefMap
from protocol.model.resource_names import ResourceName, TypeRef, parse_account_id, parse_did

T = TypeVar("T")
M = TypeVar("M", bound=TypeRefMap)

text = _r_str
"""A string; anything else is an error."""
json_value: Callable[[Any], JsonValue] = _r_json
"""Any JSON value; YAML plain scalars resolve as serde_yaml resolves them (``10`` is a number)."""
write_json: Callable[[JsonValue], Any] = _w_json
"""Object keys sorted, as ``serde_json::Value`` (a ``BTreeMap``) writes them."""


def struct(value: Any, name: str, allowed: Iterable[str]) -> dict[str, Any]:
    """``value`` as a map of only the ``allowed`` keys (the reference denies unknown fields)."""
    if not isinstance(value, dict):
        raise Invalid("", f"expected a {name} map, got {describe(value)}")
    keys = tuple(allowed)
    for key in value:
        if key not in keys:
            raise Invalid(
                str(key),
                f"unknown field `{key}` of {name}, expected one of "
                + ", ".join(f"`{k}`" for k in keys),
            )
    return value


def field(tree: dict[str, Any], key: str, read: Callable[[Any], T]) -> T:
    """A required field, read with ``read``; errors get ``key`` prepended to their path."""
    if key not in tree or _is_null(tree[key]):
        raise Invalid(key, f"missing field `{key}`")
    return nested(key, read, tree[key])


def optional(tree: dict[str, Any], key: str, read: Callable[[Any], T]) -> T | None:
    value = tree.get(key)
    return None if _is_null(value) else nested(key, read, value)


def nested(key: str, read: Callable[[Any], T], value: Any) -> T:
    try:
        return read(value)
    except Invalid as error:
        error.path.append(key)
        raise


def sequence(read: Callable[[Any], T]) -> Callable[[Any], tuple[T, ...]]:
    def read_all(value: Any) -> tuple[T, ...]:
        if not isinstance(value, list):
            raise Invalid("", f"expected a sequence, got {describe(value)}")
        return tuple(nested(f"[{index}]", read, item) for index, item in enumerate(value))

    return read_all


def parsed(parse: Callable[[str], T]) -> Callable[[Any], T]:
    """A reader of text through ``parse``; its ``OdfError`` becomes the field's reason."""
    return partial(_parsed, parse)


def uint64(value: Any) -> int:
    return _r_int(value, "uint64")


timestamp = parsed(Timestamp.parse_rfc3339)
resource_name = parsed(ResourceName)
account_name = parsed(AccountName)
account_id = parsed(parse_account_id)
did = parsed(parse_did)
type_ref = parsed(TypeRef)


def type_ref_map(cls: type[M]) -> Callable[[Any], M]:
    def read(value: Any) -> M:
        if not isinstance(value, dict):
            raise Invalid("", f"expected a map, got {describe(value)}")
        entries = {str(k): nested(str(k), json_value, v) for k, v in value.items()}
        try:
            return cls(entries)
        except OdfError as error:
            raise Invalid("", str(error)) from None

    return read


def write_type_ref_map(value: TypeRefMap) -> dict[str, Any]:
    return {key: write_json(item) for key, item in value.items()}


def account_ref(value: Any) -> AccountRef:
    """``{id?, did?, name?}`` or the short form: a bare account name."""
    if isinstance(value, str):
        return parsed(AccountRef.parse)(value)
    tree = struct(value, "AccountRef", ("id", "did", "name"))
    return AccountRef(
        id=optional(tree, "id", text),
        did=optional(tree, "did", account_id),
        name=optional(tree, "name", account_name),
    )


def write_account_ref(value: AccountRef) -> dict[str, Any]:
    return _write_ids(value)


def account_handle(value: Any) -> AccountHandle:
    tree = struct(value, "AccountHandle", ("id", "did", "name"))
    return AccountHandle(
        id=field(tree, "id", text),
        did=field(tree, "did", account_id),
        name=field(tree, "name", account_name),
    )


def write_account_handle(value: AccountHandle) -> dict[str, Any]:
    return {"id": value.id, "did": str(value.did), "name": str(value.name)}


def resource_ref(value: Any) -> ResourceRef:
    """``{account?, type, id?, did?, name?}`` or the short form ``Type:[account/]name``."""
    if isinstance(value, str):
        return parsed(ResourceRef.parse)(value)
    tree = struct(value, "ResourceRef", ("account", "type", "id", "did", "name"))
    return ResourceRef(
        account=optional(tree, "account", account_ref),
        type=field(tree, "type", type_ref),
        id=optional(tree, "id", text),
        did=optional(tree, "did", did),
        name=optional(tree, "name", resource_name),
    )


def write_resource_ref(value: ResourceRef) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if value.account is not None:
        out["account"] = write_account_ref(value.account)
    out["type"] = str(value.type)
    return out | _write_ids(value)


def _write_ids(value: AccountRef | ResourceRef) -> dict[str, Any]:
    """The optional ``id``, ``did``, ``name`` that end both reference forms, in that order."""
    out: dict[str, Any] = {}
    if value.id is not None:
        out["id"] = value.id
    if value.did is not None:
        out["did"] = str(value.did)
    if value.name is not None:
        out["name"] = str(value.name)
    return out
