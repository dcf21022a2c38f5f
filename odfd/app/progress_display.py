"""Progress of long work on a terminal (``odfd verify``, ``ingest``, ``pull``), drawn as the
verifier draws its own: a line on stderr only when it is a terminal, never in logs or pipes.
Interfaces take it from here so that they name no verifier internals; it loads only
``threading`` and ``time``, so thin clients (``odfd log``, ``list``, ``status``) stay fast."""

from __future__ import annotations

from verifier.progress import NoProgress, Progress, format_bytes, format_duration, progress_for

__all__ = ["NoProgress", "Progress", "format_bytes", "format_duration", "progress_for"]
