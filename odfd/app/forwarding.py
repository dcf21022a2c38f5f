"""The contract between the thin ``odfd`` client and the workspace's daemon for the commands a
running daemon takes over (``odfd.cli.via_daemon`` is the client, ``odfd.daemon.commands`` the
daemon's side): which commands, their typed requests, the wire frames, and the environment both
must share.

The client parses the command line into a request (a frozen dataclass of plain values, one per
command, ``Request``), sends its JSON form; the daemon calls the application layer with its warm
node and answers with frames, one JSON object a line: ``accepted`` or ``refused``, then the use
case's ``event``s as they happen, then one ``result``, ``error`` or ``interrupted``. The client
renders them with the renderer a local run uses.

Imported by the CLI before any command module, so it imports only the standard library, and
(``odfd --help`` builds the parser and nothing else) ``dataclasses`` only when a request is
encoded or decoded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

#: Commands that start an engine: run by the workspace's daemon when one runs.
FORWARDED = frozenset({"ingest", "pull", "verify", "sql", "provenance"})

#: Sub-commands of those that serve from the calling process, never in the daemon.
LOCAL_SUBCOMMANDS = frozenset({("sql", "server")})

#: Bumped when the requests or the frames change; a daemon speaking another one is not used.
PROTOCOL = 2
RUN_PATH = "/run"
#: The variable that keeps a command in the client's process.
NO_DAEMON_ENV = "ODFD_NO_DAEMON"
#: ``ODFD_*`` variables that do not change what a command does (they are sent as arguments or
#: only steer the daemon itself); every other one must be equal in the CLI and the daemon.
IGNORED_ENV = ("ODFD_HOME", "ODFD_VERBOSE", NO_DAEMON_ENV)
IGNORED_ENV_PREFIX = "ODFD_DAEMON_"
#: Other variables a command reads (colour, time zone, locale of printed numbers and times).
COMPARED_ENV = ("NO_COLOR", "TZ", "LANG", "LC_ALL")

#: Frame kinds (the ``frame`` member of each line from the daemon).
ACCEPTED, REFUSED, EVENT, RESULT, ERROR, INTERRUPTED = (
    "accepted",
    "refused",
    "event",
    "result",
    "error",
    "interrupted",
)


class Request:
    """Base of the typed requests: a frozen dataclass of plain values (str, int, float, bool,
    ``None``, tuples of those or of nested requests' parts), named by ``command``."""

    command: ClassVar[str]

    def to_json(self) -> dict[str, Any]:
        import dataclasses

        return dataclasses.asdict(self)  # type: ignore[call-overload]  # subclasses are dataclasses

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Any:
        """The request ``to_json`` gave (``ValueError`` for anything else)."""
        return _decode(cls, data)


def _decode(cls: type, data: Any) -> Any:
    import dataclasses
    import typing

    if not isinstance(data, Mapping):
        raise ValueError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    values = {}
    for spec in dataclasses.fields(cls):
        if spec.name not in data:
            if spec.default is dataclasses.MISSING:
                raise ValueError(f"{cls.__name__}: {spec.name} is missing")
            continue
        values[spec.name] = _value(hints[spec.name], data[spec.name], spec.name)
    return cls(**values)


def _value(hint: Any, value: Any, name: str) -> Any:
    import dataclasses
    import types
    import typing

    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(hint):
            return None
        (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        origin = typing.get_origin(hint)
    if origin is tuple:
        if not isinstance(value, list):
            raise ValueError(f"{name}: expected a list")
        (item, _more) = typing.get_args(hint)
        return tuple(_value(item, v, name) for v in value)
    if dataclasses.is_dataclass(hint):
        return _decode(hint, value)  # type: ignore[arg-type]  # a dataclass type
    if hint is float and isinstance(value, int):
        return float(value)
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise ValueError(f"{name}: expected {hint.__name__}, got {type(value).__name__}")
    return value


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
