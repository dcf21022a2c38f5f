"""Where resources hold secrets, and how they are stored: only encrypted.

A ``SecretSet``'s ``spec.secrets`` and a ``WebhookTarget``'s ``spec.secret`` are ``Secret``
values: a plain string (or ``{value}``), which the node encrypts on apply, or ``{value: <JWE>,
contentEncoding: jwe}``, stored as given. Re-applying the same plain value keeps the stored
ciphertext (so an unchanged manifest changes nothing); the plain value is never stored, logged,
shown or put in an error message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from odfd.app.node_secrets import CONTENT_ENCODING, NodeSecrets, SecretError
from odfd.app.resource_types import SECRET_SET, WEBHOOK_TARGET
from odfd.errors import ManifestError


def _fields(schema: str, spec: Any) -> Iterator[tuple[str, dict[str, Any], str]]:
    """``(path, container, key)`` of each secret in a spec."""
    if not isinstance(spec, dict):
        return
    if schema == SECRET_SET.schema and isinstance(spec.get("secrets"), dict):
        for key in spec["secrets"]:
            yield f"spec.secrets.{key}", spec["secrets"], key
    elif schema == WEBHOOK_TARGET.schema and "secret" in spec:
        yield "spec.secret", spec, "secret"


def check_encodings(schema: str, spec: Any, where: str) -> None:
    """Refuse a secret in an encoding this node does not read (before anything is stored)."""
    for path, container, key in _fields(schema, spec):
        value = container[key]
        encoding = value.get("contentEncoding") if isinstance(value, dict) else None
        if encoding not in (None, CONTENT_ENCODING):
            raise ManifestError(
                f"{where}: {path}.contentEncoding: {encoding!r} is not one odfd reads; give the "
                "plain value, or a JWE with `contentEncoding: jwe`"
            )


def _plain(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and value.get("contentEncoding") is None:
        return str(value["value"])
    return None


def encrypt_secrets(schema: str, spec: Any, previous: Any, secrets: NodeSecrets) -> Any:
    """The spec with every plain secret encrypted (reusing ``previous``'s ciphertext of the same
    value, so re-applying changes nothing)."""
    fields = list(_fields(schema, spec))
    if not fields:
        return spec
    spec = _copy(spec)
    old = {path: container[key] for path, container, key in _fields(schema, previous)}
    for path, container, key in _fields(schema, spec):
        plain = _plain(container[key])
        if plain is None:
            continue
        token = _reusable(old.get(path), plain, secrets) or secrets.encrypt(plain)
        container[key] = {"contentEncoding": CONTENT_ENCODING, "value": token}
    return spec


def _reusable(stored: Any, plain: str, secrets: NodeSecrets) -> str | None:
    if not isinstance(stored, dict) or stored.get("contentEncoding") != CONTENT_ENCODING:
        return None
    try:
        same = secrets.decrypt(stored["value"]) == plain
    except SecretError:
        return None
    return str(stored["value"]) if same else None


def undecryptable(schema: str, spec: Any, secrets: NodeSecrets) -> list[str]:
    """``path: reason`` of each stored secret this node cannot decrypt."""
    problems = []
    for path, container, key in _fields(schema, spec):
        try:
            secrets.decrypt(container[key]["value"])
        except SecretError as err:
            problems.append(f"{path}: {err}")
    return problems


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
