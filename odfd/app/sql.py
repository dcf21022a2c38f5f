"""``sql``: run statements over the node's datasets (``odfd.app.query``) and encode each result
in the format asked (``odfd.app.result_formats``), into a file or as text for the caller to show.

Called by ``odfd sql`` and by the daemon for a thin client: the request and the events have a
stable JSON form (a result travels as its encoded text, so a client loads no Arrow), and this
module imports the engines only when it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from odfd.app.events import Event, EventSink
from odfd.app.forwarding import Request

if TYPE_CHECKING:
    from odfd.app.node import Node


@dataclass(frozen=True, slots=True)
class SqlRequest(Request):
    command: ClassVar[str] = "sql"
    statements: tuple[str, ...]
    engine: str
    output: str
    """One of ``odfd.app.result_formats.FORMATS``."""
    output_path: str | None = None
    """Write the (single) result there instead of sending it back."""
    as_of: str | None = None
    """A block hash or a time every dataset is pinned to."""


@dataclass(frozen=True, slots=True)
class StatementResult(Event):
    """A statement's result, encoded as the request asked (empty when written to a file)."""

    name: ClassVar[str] = "statementResult"
    text: str


EVENTS: tuple[type[Event], ...] = (StatementResult,)


async def run_statements(node: Node, request: SqlRequest, sink: EventSink) -> None:
    """Runs the statements in order; each result is written or sent as soon as it is known."""
    import asyncio
    import io
    from pathlib import Path

    from odfd.app.query import query
    from odfd.app.result_formats import write_result
    from odfd.coordinator.query import AsOf, resolve_as_of

    block = time = None
    if request.as_of:
        block, time = await resolve_as_of(node.workspace, AsOf.parse(request.as_of))
    path = None if request.output_path is None else Path(request.output_path)
    for statement in request.statements:
        table = await query(node, statement, engine=request.engine, block=block, time=time)
        text = io.StringIO()
        await asyncio.to_thread(write_result, table, request.output, path, text)
        sink.emit(StatementResult(text.getvalue()))
