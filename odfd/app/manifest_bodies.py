"""The resource manifests of a request body, as the resource protocol's ``POST`` receives them
(``odfd.server.resource_api``): JSON (one object or a list) or YAML (one or more documents), each
document without ``$schema`` of the type its path names, and one naming another type refused with
the path it belongs to. The server only hands the body over, so what a body may hold is decided
here, beside the manifests ``odfd apply`` reads from files (``odfd.app.resources``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from odfd.app.resource_types import ResourceType, type_of
from odfd.app.resources import Manifest, read_documents
from odfd.errors import ManifestError
from protocol.codec.yaml import parse_documents
from protocol.errors import DecodeError

if TYPE_CHECKING:
    from protocol.identity import AccountName


def body_manifests(
    body: bytes, *, yaml: bool, kind: ResourceType, account: AccountName | None
) -> tuple[list[Manifest], bool]:
    """The manifests of ``body`` (YAML if ``yaml``, else JSON), checked as one batch, those that
    name no account ``account``'s (None: the node's own); and whether the body was a batch (a
    list, several documents), which the response mirrors."""
    documents, batch = _documents(body, yaml, kind)
    return read_documents(documents, account), batch


def _documents(body: bytes, yaml: bool, kind: ResourceType) -> tuple[list[tuple[Any, str]], bool]:
    """Each document of the body with where it came from, given the path's type when it names
    none."""
    if not body.strip():
        raise ManifestError("the request body is empty: send the manifest (JSON or YAML)")
    batch = False
    if yaml:
        try:
            parsed: Any = [d for d in parse_documents(body, "request body") if d is not None]
        except DecodeError as err:
            raise ManifestError(str(err)) from None
        batch = len(parsed) > 1
    else:
        try:
            parsed = json.loads(body)
        except (ValueError, UnicodeDecodeError) as err:
            raise ManifestError(f"request body: not JSON: {err}") from None
        batch = isinstance(parsed, list)
        parsed = parsed if batch else [parsed]
    if not parsed:
        raise ManifestError("the request body holds no manifest")
    documents = []
    for n, document in enumerate(parsed):
        where = f"request body document {n}"
        if not isinstance(document, dict):
            raise ManifestError(f"{where}: expected a resource manifest (a mapping)")
        written = document.get("$schema")
        if written is None:
            document = {"$schema": kind.schema, **document}
        else:
            try:
                given = type_of(str(written))
            except ManifestError as err:
                raise ManifestError(f"{where}: $schema: {err}") from None
            if given is not kind:
                raise ManifestError(
                    f"{where}: $schema: a {given.name} sent to the {kind.name} path; "
                    f"send it to /{'/'.join(given.schema.split('/')[-3:-1])}/{given.name.lower()}"
                )
        documents.append((document, where))
    return documents, batch
