"""Rows rendered as an answer renders them: ``split``, ``render`` and ``place`` in turn (the
steps ``protocol.query.response`` takes, here on one thread)."""

from __future__ import annotations

import pyarrow as pa

from protocol.query.render.data import DataWriter, Rendered


def render_batch(writer: DataWriter, batch: pa.RecordBatch) -> Rendered:
    """The text of ``batch``'s rows where it follows those rendered before (for JsonSoA
    nothing until ``finish``)."""
    out = Rendered()
    for chunk in writer.split(batch):
        out.extend(writer.place(writer.render(chunk)))
    return out
