"""Records pushed to an RFC-018 ``RestEndpoint`` Source: found by its stored name, the body read
as JSON records and held in the Source's buffer (its overflow policy applied) until a flow's
``Ingest`` task commits them. The HTTP route (``odfd.server.source_api``) checks the token and
the body's size and turns these errors into statuses.

The body is NdJson (``application/x-ndjson``, or no media type) or a JSON array or object
(``application/json``); each record must be a JSON object.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odfd.app.resource_types import SOURCE
from odfd.errors import OdfdError
from odfd.sources.spec import SourceDefinition, SourceSpecError
from storage.catalog.resources import ResourceRecord, ResourceTable

if TYPE_CHECKING:
    from odfd.app.node import Node
    from odfd.sources.buffers import Accepted, SourceBuffers

_NDJSON = ("application/x-ndjson", "application/jsonl", "application/json-seq")


class NoPushSourceError(OdfdError):
    """No Source of that name, or one that takes no pushed records."""


class BadRecordsError(OdfdError):
    """A body that is not JSON records."""


class UnsupportedMediaTypeError(OdfdError):
    """A body of a media type other than JSON or NdJson."""


@dataclass(frozen=True, slots=True)
class PushSource:
    """A Source that takes pushed records."""

    record: ResourceRecord
    definition: SourceDefinition

    @property
    def name(self) -> str:
        return self.record.name

    def push(self, buffers: SourceBuffers, body: bytes, media_type: str | None) -> Accepted:
        """What the Source's buffer took of ``body``'s records. Raises
        :class:`BadRecordsError`, :class:`UnsupportedMediaTypeError` and ``BufferFullError``
        (the policy is ``Reject``: nothing was taken)."""
        records = parse_records(body, media_type)
        buffer = buffers.of(self.record.id, self.record.name, self.definition.buffer())
        return buffer.push(records)


async def push_source(node: Node, stored: str) -> PushSource:
    """The Source named ``stored`` as the catalog keeps it (``account/name``, or ``name`` in
    the built-in account), found before a body is read. Raises :class:`NoPushSourceError`."""
    record = await ResourceTable(node.workspace.catalog).find(SOURCE.schema, stored)
    if record is None:
        raise NoPushSourceError(f"no Source {stored} on this node")
    try:
        definition = SourceDefinition.from_record(record)
    except SourceSpecError as err:
        raise NoPushSourceError(f"Source {stored} cannot take pushes: {err}") from None
    if not definition.pushed:
        raise NoPushSourceError(f"Source {stored} polls its data; it takes no pushed records")
    return PushSource(record, definition)


def parse_records(body: bytes, media_type: str | None) -> list[bytes]:
    """The records of a body, each as one line of JSON (what the buffer holds)."""
    essence = (media_type or "").split(";", 1)[0].strip().lower()
    if essence == "application/json":
        try:
            value = json.loads(body)
        except ValueError as err:
            raise BadRecordsError(f"the body is not JSON: {err}") from None
        items = value if isinstance(value, list) else [value]
        for n, item in enumerate(items):
            if not isinstance(item, dict):
                raise BadRecordsError(f"record {n} is not a JSON object")
        return [json.dumps(item, separators=(",", ":")).encode() for item in items]
    if essence and essence not in _NDJSON:
        raise UnsupportedMediaTypeError(
            f"media type {essence!r} is not supported here; send application/x-ndjson or "
            "application/json records"
        )
    records = []
    for n, line in enumerate(body.splitlines()):
        line = line.strip()
        if not line:
            continue
        if not line.startswith(b"{"):
            raise BadRecordsError(f"line {n + 1} is not a JSON object")
        try:
            json.loads(line)
        except ValueError as err:
            raise BadRecordsError(f"line {n + 1} is not JSON: {err}") from None
        records.append(line)
    return records
