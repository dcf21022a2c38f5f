"""A collection's entries as an Atom feed, or one entry as an Atom entry document (OData 3.0's
Atom format), byte for byte as the reference writes them; a null value is written as OData
says (``m:null="true"``) in both, where the reference's feed writes its placeholder value."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from odfd.app.odata import ODataCollection, ODataRows
from odfd.app.odata_query import KEY_ALIAS
from odfd.server.odata.csdl import NAMESPACE, XML_DECLARATION
from odfd.server.odata.edm import column_texts, edm_type, xml_escape
from protocol.model import Timestamp

_NAMESPACES = (
    ' xmlns="http://www.w3.org/2005/Atom"'
    ' xmlns:d="http://schemas.microsoft.com/ado/2007/08/dataservices"'
    ' xmlns:m="http://schemas.microsoft.com/ado/2007/08/dataservices/metadata"'
)
_SCHEME = "http://schemas.microsoft.com/ado/2007/08/dataservices/scheme"


PIECE_ROWS = 10_000
"""Entries rendered at a time: a large feed is sent while the rest is still being written."""


def feed(
    base: str, collection: ODataCollection, rows: ODataRows, next_url: str | None
) -> Iterator[str]:
    """The feed of ``rows`` of ``collection`` served under ``base`` (no trailing /), in pieces
    of ``PIECE_ROWS`` entries, ending with a ``next`` link to ``next_url`` when the node cut the
    page short (OData's server-driven paging, which Power BI and Excel follow; the reference
    stops at its first page)."""
    name = xml_escape(collection.name)
    updated = _updated(collection.updated)
    base = xml_escape(base)
    head = (
        f'{XML_DECLARATION}<feed xml:base="{base}/"{_NAMESPACES}>'
        f'<id>{base}/{name}</id><title type="text">{name}</title><updated>{updated}</updated>'
        f'<link rel="self" title="{name}" href="{name}"/>'
    )
    if rows.count is not None:
        head += f"<m:count>{rows.count}</m:count>"
    tail = "" if next_url is None else f'<link rel="next" href="{xml_escape(next_url)}"/>'
    table = pa.Table.from_batches(rows.batches, rows.schema)
    pieces = range(0, table.num_rows, PIECE_ROWS)
    for start in pieces:
        body = "".join(_entries(base, collection, table.slice(start, PIECE_ROWS)))
        yield (head if start == 0 else "") + body
    yield ("" if pieces else head) + tail + "</feed>"


def entry(base: str, collection: ODataCollection, rows: ODataRows) -> str:
    """The entry document of the single row of ``rows``."""
    table = pa.Table.from_batches(rows.batches, rows.schema)
    base = xml_escape(base)
    (body,) = _entries(base, collection, table)
    opening = f'{XML_DECLARATION}<entry xml:base="{base}/"{_NAMESPACES}>'
    return opening + body.removeprefix("<entry>")


def _entries(base: str, collection: ODataCollection, table: pa.Table) -> Iterator[str]:
    """Each row's ``<entry>``; ``base`` already escaped."""
    name = xml_escape(collection.name)
    updated = _updated(collection.updated)
    edit_prefix = (
        f'<category scheme="{_SCHEME}" term="{NAMESPACE}.{name}"/><link rel="edit" title="{name}"'
    )
    keys = column_texts(table.column(KEY_ALIAS))
    properties = []
    for field, column in zip(table.schema, table.columns, strict=True):
        typ = edm_type(field.type)
        if field.name != KEY_ALIAS and typ is not None:
            properties.append((f"d:{field.name}", typ, column_texts(column)))
    for row, key in enumerate(keys):
        values = []
        for tag, typ, texts in properties:
            text = texts[row]
            if text is None:
                values.append(f'<{tag} m:type="{typ}" m:null="true"/>')
            else:
                values.append(f'<{tag} m:type="{typ}">{text}</{tag}>')
        yield (
            f"<entry><id>{base}/{name}({key})</id>{edit_prefix}"
            f' href="{name}({key})"/><title/><updated>{updated}</updated>'
            '<author><name/></author><content type="application/xml"><m:properties>'
            f"{''.join(values)}</m:properties></content></entry>"
        )


def _updated(time: Timestamp | None) -> str:
    """The head block's system time, RFC 3339 to the millisecond (as chrono writes it)."""
    if time is None:
        return ""
    millis = time.epoch_nanos // 1_000_000
    text = column_texts(pa.array([millis], pa.timestamp("ms", tz="UTC")))[0]
    assert text is not None
    return text
