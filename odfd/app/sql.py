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
    from pathlib import Path

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
    proof: bool = False
    """Answer the single statement with the signed answer ``/query`` gives with a proof
    (``odfd.app.answer_checks``), as JSON."""
    limit: int | None = None
    """With ``proof``: at most this many rows (default: the node's ``[server] query_max_rows``)."""


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

    from odfd.app.query import pinned_at, query
    from odfd.app.result_formats import write_result

    path = None if request.output_path is None else Path(request.output_path)
    if request.proof:
        await _answer_with_proof(node, request, path, sink)
        return
    block, time = await pinned_at(node, request.as_of)
    for statement in request.statements:
        table = await query(node, statement, engine=request.engine, block=block, time=time)
        text = io.StringIO()
        await asyncio.to_thread(write_result, table, request.output, path, text)
        sink.emit(StatementResult(text.getvalue()))


async def _answer_with_proof(
    node: Node, request: SqlRequest, path: Path | None, sink: EventSink
) -> None:
    import asyncio

    from odfd.app.answer_checks import answer_with_proof

    (statement,) = request.statements
    proven = await answer_with_proof(node, statement, engine=request.engine, limit=request.limit)
    if path is not None:
        await asyncio.to_thread(path.write_bytes, proven.body + b"\n")
        sink.emit(StatementResult(""))
    else:
        sink.emit(StatementResult(proven.body.decode("utf-8") + "\n"))
