"""Which commands a running daemon takes over (``odfd.cli.via_daemon``): a module of its own so
that the CLI's entry point and the thin client share it without importing each other."""

from __future__ import annotations

from collections.abc import Sequence

#: Commands that start an engine: run by the workspace's daemon when one runs.
DAEMON_COMMANDS = frozenset({"ingest", "pull", "verify", "sql", "provenance"})

#: Sub-commands of those that serve from the calling process, never in the daemon.
LOCAL_SUBCOMMANDS = frozenset({("sql", "server")})


def serves_here(command: str, argv: Sequence[str]) -> bool:
    """Whether ``odfd ARGV`` (whose command is ``command``) is a server of its own that stays in
    this process although the daemon runs its command (``odfd sql server``)."""
    words = list(argv)
    after = words[words.index(command) + 1 :] if command in words else []
    return any((command, word) in LOCAL_SUBCOMMANDS for word in after)
