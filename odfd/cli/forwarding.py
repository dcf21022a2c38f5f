"""Which commands a running daemon takes over (``odfd.cli.via_daemon``): a module of its own so
that the CLI's entry point and the thin client share it without importing each other."""

from __future__ import annotations

#: Commands that start an engine: run by the workspace's daemon when one runs.
DAEMON_COMMANDS = frozenset({"ingest", "pull", "verify", "sql", "provenance"})
