"""Secrets written into a manifest in the clear, found before the manifest becomes blocks.

A polling source's fetch step is stored in the dataset's metadata chain as written: every peer,
mirror and IPFS node that holds the dataset holds it, and no later block takes it back. So a
password, token or key there must be a ``${{ env.NAME }}`` template, filled in only when the
source is pulled (``odfd.ingest.template``). ``literal_secrets`` names each field that holds one
as plain text: the MQTT password, a header or container variable named like a credential, and a
password or credential query parameter in a URL. Every path that makes a dataset from a
manifest warns through it: ``odfd add`` (``literal_secrets``), ``odfd apply`` and the resource API
(``applied_literal_secrets``, over the ``Dataset`` resources applied).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from protocol.model import (
    DatasetSnapshot,
    FetchStepContainer,
    FetchStepEthereumLogs,
    FetchStepMqtt,
    FetchStepUrl,
    SetPollingSource,
)

if TYPE_CHECKING:
    from odfd.app.resources import Manifest

_TEMPLATE = "${{"
_CREDENTIAL = re.compile(
    r"auth|token|secret|passw|pwd|api[-_]?key|access[-_]?key|private[-_]?key|cookie|signature",
    re.IGNORECASE,
)
"""Names of headers, variables and query parameters that carry credentials."""


@dataclass(frozen=True, slots=True)
class LiteralSecret:
    """A field of a dataset's manifest holding a credential as plain text."""

    alias: str
    field: str
    """Where, e.g. ``SetPollingSource.fetch.headers[Authorization]``."""

    def message(self) -> str:
        return (
            f"{self.alias}: {self.field} is a literal secret: it would be in the dataset's "
            "metadata, which every copy of the dataset keeps for good; write it as a "
            "${{ env.NAME }} template, set when pulling"
        )


def literal_secrets(snapshot: DatasetSnapshot) -> list[LiteralSecret]:
    """The fields of ``snapshot``'s polling sources that hold a credential in the clear."""
    found = []
    for event in snapshot.metadata:
        if isinstance(event, SetPollingSource):
            for field in _fetch_fields(event.fetch):
                found.append(LiteralSecret(str(snapshot.name), f"SetPollingSource.fetch.{field}"))
    return found


def applied_literal_secrets(manifests: Iterable[Manifest]) -> list[LiteralSecret]:
    """The literal secrets of the ``Dataset`` resources among ``manifests`` (validated by
    ``odfd.app.resources.parse_manifest``): their metadata becomes the dataset's chain as a
    snapshot's does."""
    from odfd.app.resources import DATASET_SCHEMA, manifest_snapshot

    return [
        secret
        for manifest in manifests
        if manifest.schema == DATASET_SCHEMA
        for secret in literal_secrets(manifest_snapshot(manifest))
    ]


def _fetch_fields(fetch: object) -> list[str]:
    fields = []
    if isinstance(fetch, FetchStepMqtt) and _literal(fetch.password):
        fields.append("password")
    if isinstance(fetch, FetchStepUrl):
        fields += [f"url ({name})" for name in _url_credentials(fetch.url)]
        for header in fetch.headers or ():
            if _CREDENTIAL.search(header.name) and _literal(header.value):
                fields.append(f"headers[{header.name}]")
    if isinstance(fetch, FetchStepEthereumLogs) and fetch.node_url is not None:
        fields += [f"nodeUrl ({name})" for name in _url_credentials(fetch.node_url)]
    if isinstance(fetch, FetchStepContainer):
        for variable in fetch.env or ():
            if _CREDENTIAL.search(variable.name) and _literal(variable.value):
                fields.append(f"env[{variable.name}]")
    return fields


def _url_credentials(url: str) -> list[str]:
    """The parts of ``url`` that hold a credential as plain text: a password before the host,
    query parameters named like credentials."""
    parts = urlsplit(url)
    names = ["password"] if _literal(parts.password) else []
    return names + [
        f"query parameter {name}"
        for name, value in parse_qsl(parts.query, keep_blank_values=False)
        if _CREDENTIAL.search(name) and _literal(value)
    ]


def _literal(value: str | None) -> bool:
    return bool(value) and _TEMPLATE not in (value or "")
