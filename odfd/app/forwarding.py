"""The contract between the thin ``odfd`` client and the workspace's daemon for the commands a
running daemon takes over (``odfd.cli.via_daemon`` is the client, ``odfd.daemon.commands`` the
daemon's side): which commands, the wire frames, and the environment both must share.

Imported by the CLI before any command module, so it imports only the standard library.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

#: Commands that start an engine: run by the workspace's daemon when one runs.
FORWARDED = frozenset({"ingest", "pull", "verify", "sql", "provenance"})

#: Sub-commands of those that serve from the calling process, never in the daemon.
LOCAL_SUBCOMMANDS = frozenset({("sql", "server")})

#: Bumped when the request or the frames change; a daemon speaking another one is not used.
PROTOCOL = 1
RUN_PATH = "/run"
#: The variable that keeps a command in the client's process.
NO_DAEMON_ENV = "ODFD_NO_DAEMON"
#: ``ODFD_*`` variables that do not change what a command does (they are sent as arguments or
#: only steer the daemon itself); every other one must be equal in the CLI and the daemon.
IGNORED_ENV = ("ODFD_HOME", "ODFD_VERBOSE", NO_DAEMON_ENV)
IGNORED_ENV_PREFIX = "ODFD_DAEMON_"
#: Other variables a command reads (colour, time zone, locale of printed numbers and times).
COMPARED_ENV = ("NO_COLOR", "TZ", "LANG", "LC_ALL")

#: Frames from the daemon: kind (1 byte) + length (4 bytes, big-endian) + payload.
FRAME_HEADER = struct.Struct(">cI")
ACCEPTED, REFUSED, STDOUT, STDERR, EXIT = b"a", b"r", b"o", b"e", b"x"


class CommandLine(Protocol):
    """The CLI as the daemon runs it for a client: handed to the daemon by ``odfd daemon``, so
    the daemon itself never imports the layer above it."""

    def main(
        self,
        argv: Sequence[str] | None = None,
        *,
        forward: bool = True,
        prepare: Callable[[Any], None] | None = None,
    ) -> int:
        """Runs ``odfd ARGV`` in this process (``forward=False``: never back to a daemon)."""
        ...

    def warm_up(self, commands: frozenset[str]) -> None:
        """Loads what running ``commands`` needs, before a client's first one waits for it."""
        ...


def serves_here(command: str, argv: Sequence[str]) -> bool:
    """Whether ``odfd ARGV`` (whose command is ``command``) is a server of its own that stays in
    this process although the daemon runs its command (``odfd sql server``)."""
    words = list(argv)
    after = words[words.index(command) + 1 :] if command in words else []
    return any((command, word) in LOCAL_SUBCOMMANDS for word in after)


def relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that must be equal in the CLI and the daemon for a command to behave alike."""
    return {
        name: value
        for name, value in env.items()
        if (name.startswith("ODFD_") and name not in IGNORED_ENV)
        and not name.startswith(IGNORED_ENV_PREFIX)
        or name in COMPARED_ENV
    }


def env_difference(ours: Mapping[str, str], theirs: Mapping[str, str]) -> list[str]:
    """Names of the variables set differently on the two sides."""
    return sorted(n for n in ours.keys() | theirs.keys() if ours.get(n) != theirs.get(n))
