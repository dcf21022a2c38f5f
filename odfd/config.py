"""The node's configuration: one typed object read from the workspace's ``config.toml``, with
environment variables overriding the file.

Every setting, its default and its meaning is documented in ``config.example.toml`` at the root of
the repository. Each ``[section] key`` can be overridden by the environment variable
``ODFD_<SECTION>_<KEY>`` in upper case (``ODFD_SERVER_PORT=9000``, ``ODFD_LOG_FORMAT=json``,
``ODFD_IPFS_API=/ip4/…``); lists are comma-separated there. Nested tables (``[spark.conf]``,
``[sync.tokens]``) are file-only. Anything unknown or malformed stops the node with a
``ConfigError`` naming the key and where it came from (the file, or the environment variable), so
a typo never silently falls back to a default.
"""

from __future__ import annotations

import functools
import math
import os
import re
import secrets
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from odfd.errors import OdfdError
from protocol.errors import ParseError
from protocol.frozen import frozen_dataclass
from storage.ipfs_settings import (
    DEFAULT_IPFS_API,
    DEFAULT_IPFS_GATEWAY,
    DEFAULT_RECORD_VALIDITY,
    DEFAULT_REPUBLISH_INTERVAL,
    IpfsSettings,
)
from storage.s3_settings import S3Credentials, S3Settings, is_s3_url, parse_s3_url
from storage.stores.http_limits import HttpLimits
from verifier.engine.spark.settings import SparkConfigError, SparkSettings

if TYPE_CHECKING:
    from protocol.identity import DatasetAlias, DatasetAliasPattern

ENV_PREFIX = "ODFD_"


class ConfigError(OdfdError):
    """The node's configuration is invalid; the message names the key and the file or variable."""


# --- durations ------------------------------------------------------------------------------------

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_duration(text: str | int | float) -> float:
    """Seconds in ``"90s"``, ``"5m"``, ``"1h30m"``, ``"2d"`` (or a plain number of seconds)."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a duration")
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        compact = text.strip().replace(" ", "")
        try:
            seconds = float(compact)
        except ValueError:
            parts = _DURATION_PART.findall(compact)
            if not compact or "".join(n + u for n, u in parts) != compact:
                raise ValueError(
                    f"{text!r} is not a duration (use e.g. 30s, 5m, 1h30m, 2d)"
                ) from None
            seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{text!r} is not a non-negative duration")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest exact spelling ``parse_duration`` reads back (``3600`` -> ``1h``)."""
    if seconds <= 0:
        return "0s"
    whole = int(seconds)
    if whole != seconds:
        return f"{seconds:g}s"
    out = ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if whole >= size:
            out += f"{whole // size}{unit}"
            whole %= size
    return out


# --- sections -------------------------------------------------------------------------------------


@frozen_dataclass
class ServerConfig:
    """``[server]``: the node's HTTP server (``odfd serve``, the daemon)::

    [server]
    address = "127.0.0.1"
    port = 8080
    push_tokens = ["…"]          # bearer tokens allowed to push; none: pushes refused
    url_signing_key = "…"        # hex; HMAC key of signed object URLs (default: random per start)
    url_ttl_seconds = 900        # how long a signed object URL stays valid
    base_url = "https://…/"      # the public URL of this server, if behind a proxy
    private = ["internal.%"]     # alias patterns of datasets served only to a read or admin token
    read_tokens = ["…"]          # bearer tokens that may read private datasets
    admin_tokens = ["…"]         # bearer tokens for the console's actions (sync now, audit now)
    flight_sql_port = 50050      # the daemon also serves Flight SQL here (default: off)
    flight_sql_allow_anonymous = true  # false: Flight SQL takes no anonymous sessions
    query_timeout = "10m"        # how long a query may keep the engine busy producing its result
    query_max_rows = 1000000     # the most rows one answer of /query (or a tail) may hold
    node_key = "/path/to/key"    # the node's identity key (default: keys/node.key of the workspace)
    upload_max_bytes = 52428800  # the largest file one upload (/platform/file/upload) may hold
    upload_ttl = "1h"            # how long an uploaded file waits for its ingest before removal
    """

    address: str = "127.0.0.1"
    port: int = 8080
    push_tokens: frozenset[str] = frozenset()
    url_signing_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    url_ttl_seconds: int = 900
    base_url: str | None = None
    private: tuple[DatasetAliasPattern, ...] = ()
    read_tokens: frozenset[str] = frozenset()
    admin_tokens: frozenset[str] = frozenset()
    flight_sql_port: int | None = None
    """Port of the daemon's Flight SQL server on ``address`` (0: any free port; ``None``: off)."""
    flight_sql_allow_anonymous: bool = True
    """Whether Flight SQL opens anonymous sessions (Basic ``anonymous``, ``anon_`` tokens), as
    kamu-cli's ``protocol.flight_sql.allow_anonymous``; false: tokens of the node only."""
    query_timeout: float = 600.0
    """Seconds a query may keep the engine busy producing its result before it is stopped."""
    query_max_rows: int = 1_000_000
    """The most rows one answer of the HTTP query API may hold (a larger ``limit`` is refused)."""
    node_key: str | None = None
    """A file with the node's ed25519 identity key, which signs its answers to queries (raw
    32-byte seed or the reference's multibase text); default: the workspace's ``node.key``."""
    upload_max_bytes: int = 50 << 20
    """The largest file one upload takes (the reference's default: 50 MiB)."""
    upload_ttl: float = 3600.0
    """Seconds an upload stays usable (by ``?uploadToken=``) before it is removed."""

    def is_private(self, alias: str) -> bool:
        if not self.private:
            return False
        parsed = _alias(alias)
        return any(pattern.matches(parsed) for pattern in self.private)


@functools.lru_cache(maxsize=65536)
def _alias(text: str) -> DatasetAlias:
    """Parsed once: listings check every dataset against the private patterns."""
    from protocol.identity import DatasetAlias

    return DatasetAlias.parse(text)


@frozen_dataclass
class IpfsConfig:
    """``[ipfs]``: the IPFS node (Kubo RPC API and gateway) used for ``ipfs://`` / ``ipns://``
    remotes and pinning."""

    api: str = DEFAULT_IPFS_API
    gateway: str = DEFAULT_IPFS_GATEWAY
    pin: bool = False
    """Pin every mirrored dataset's folder in the node after each sync that changed it."""
    record_validity: float = DEFAULT_RECORD_VALIDITY
    """How long the IPNS record an owner publishes under a dataset's DID stays valid (seconds;
    ``7d``): mirrors keep it reachable while the owner is offline, up to this long."""
    republish_interval: float = DEFAULT_REPUBLISH_INTERVAL
    """How often ``odfd daemon`` republishes the owner's record of each mirrored dataset."""

    def settings(self) -> IpfsSettings:
        return IpfsSettings(
            api=self.api,
            gateway=self.gateway,
            record_validity=self.record_validity,
            republish_interval=self.republish_interval,
        )


_LIMITS = HttpLimits()


@frozen_dataclass
class SyncConfig:
    """``[sync]``: how the daemon schedules and runs mirror syncs."""

    default_interval: float = 300.0
    jitter: float = 0.1
    """Each delay is stretched or shrunk by up to this fraction, so mirrors spread out."""
    max_concurrent: int = 4
    """Syncs running at once in all (the global cap)."""
    max_per_peer: int = 2
    """Syncs running at once from one peer (``host:port`` of the source, or the IPFS node)."""
    peer_connections: int = 8
    """HTTP connections open to one peer at once, shared by every sync and probe using it."""
    parallel_objects: int = 8
    backoff_initial: float = 30.0
    backoff_max: float = 3600.0
    attempt_timeout: float = 3600.0
    startup_spread: float = 10.0
    """Mirrors overdue at start-up are spread over this window instead of all starting at once."""
    history: float = 30 * 86400.0
    """How long sync attempts are kept in the catalog."""
    transform_derivatives: bool = True
    """Update local derivative datasets when a mirror brings new data into one of their inputs."""
    freeze_after: float = 86400.0
    """A mirror of a signed dataset reports a freeze when its newest signed head is older than
    this (``odfd mirror add --freeze-after`` sets it per mirror); 0 disables the report."""
    tokens: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """URL prefix -> bearer token for pulls from and pushes to that remote (longest prefix wins)."""
    connect_timeout: float = _LIMITS.connect
    first_byte_timeout: float = _LIMITS.first_byte
    """Longest wait for a peer's answer to start, or to go on after it stopped."""
    min_rate: int = _LIMITS.min_rate
    """Bytes per second a transfer must reach over each ``rate_window``; 0 disables."""
    rate_window: float = _LIMITS.rate_window
    operation_timeout: float = 0.0
    """A whole pull running longer is abandoned (what was verified is kept); 0: no limit."""

    def limits(self) -> HttpLimits:
        return HttpLimits(
            connect=self.connect_timeout,
            first_byte=self.first_byte_timeout,
            min_rate=self.min_rate,
            rate_window=self.rate_window,
        )

    def pull_timeout(self) -> float | None:
        return self.operation_timeout or None


@frozen_dataclass
class AuditConfig:
    """``[audit]``: integrity checks after syncs and full audits on a schedule."""

    after_sync: bool = True
    """Check integrity (metadata + data) of a dataset each time a sync or transform changed it."""
    interval: float = 86400.0
    """Full audit (integrity + reproducibility) of every dataset this often; 0 disables."""
    max_concurrent: int = 1
    jobs: int = 2
    """Files checked at once within one audit."""
    withhold_failing: bool = False
    """Stop serving a dataset whose last audit failed (it is served again once one passes)."""
    keep_reports: int = 20
    """Audit reports kept per dataset."""


@frozen_dataclass
class DaemonConfig:
    """``[daemon]``: the process itself."""

    admin_socket: str | None = None
    """Unix socket of the local admin API (default: ``daemon.sock`` in the workspace)."""
    blocking_threads: int = 8
    """Threads for blocking work (file hashing, Parquet, IPFS RPC, SQLite)."""
    spark_jobs: int = 1
    """Spark jobs (transforms, reproducibility audits) run at once on the shared session."""
    spark_connect: bool = True
    """Run a local Spark Connect server for the daemon's work and for CLI commands on the same
    workspace (ignored when ``[spark] remote`` names a server)."""
    spark_connect_port: int = 0
    """Loopback port of that server (0: a free port chosen at start-up)."""
    shutdown_timeout: float = 30.0
    """On SIGTERM, how long in-flight work may run on before it is cancelled."""
    reconcile_interval: float = 60.0
    """How often controllers re-check resources even when nothing asked them to."""
    resign_interval: float = 3600.0
    """How often the owner re-signs the heads of its own datasets even when they did not move,
    so mirrors can tell a quiet dataset from a frozen peer; 0 never (docs/signed-heads.md)."""


@frozen_dataclass
class S3Config:
    """``[s3]``: how ``s3://`` and ``s3+http(s)://`` remotes are reached. Credentials come from
    ``[s3.remotes."URL prefix"]`` (longest matching prefix), else the ``AWS_*`` variables, else
    the AWS profile (``profile``, else ``$AWS_PROFILE``, else ``default``); none: unsigned."""

    region: str = ""
    """Region when neither the remote's entry, ``AWS_REGION`` nor the profile names one."""
    profile: str = ""
    retries: int = 3
    """Retries of a failed request (connection errors, 5xx) before the operation fails."""
    remotes: Mapping[str, S3Credentials] = field(default_factory=lambda: MappingProxyType({}))

    def settings(self) -> S3Settings:
        return S3Settings(
            region=self.region, profile=self.profile, remotes=self.remotes, retries=self.retries
        )


@frozen_dataclass
class StorageConfig:
    """``[storage]``: where the node keeps its datasets (the catalog, keys and cache stay in the
    workspace folder)."""

    url: str = ""
    """``""``: the workspace's ``datasets/`` folder; else a bucket and key prefix
    (``s3://bucket/prefix``, ``s3+http(s)://host:port/bucket/prefix``), reached with the ``[s3]``
    credentials."""
    cache_mb: int = 10240
    """Bound of the local cache of a bucket's data slices and checkpoints, in MiB (soft: objects
    used in the last 10 minutes stay)."""


@frozen_dataclass
class LogConfig:
    """``[log]``: structured logs on stderr."""

    format: str = "text"
    level: str = "info"


@frozen_dataclass
class MetricsConfig:
    """``[metrics]``: Prometheus exposition."""

    enabled: bool = True
    """Serve ``/metrics`` on the HTTP server (it is always on the admin socket)."""


@frozen_dataclass
class NodeConfig:
    """The whole configuration: one section each."""

    server: ServerConfig = field(default_factory=ServerConfig)
    spark: SparkSettings = field(default_factory=SparkSettings)
    ipfs: IpfsConfig = field(default_factory=IpfsConfig)
    s3: S3Config = field(default_factory=S3Config)
    storage: StorageConfig = field(default_factory=StorageConfig)
    sync: SyncConfig = field(default_factory=SyncConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    daemon: DaemonConfig = field(default_factory=DaemonConfig)
    log: LogConfig = field(default_factory=LogConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)


# --- value readers --------------------------------------------------------------------------------

Reader = Callable[[Any, bool], Any]
"""``(value, from_env) -> typed value``; raises ``ValueError`` with what was expected."""


def _int(minimum: int, maximum: int | None = None) -> Reader:
    def read(value: Any, from_env: bool) -> int:
        if from_env and isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise ValueError(f"expected an integer, got {value!r}") from None
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"expected an integer, got {value!r}")
        if value < minimum or (maximum is not None and value > maximum):
            bound = (
                f"between {minimum} and {maximum}" if maximum is not None else f"at least {minimum}"
            )
            raise ValueError(f"must be {bound}, got {value}")
        return value

    return read


def _fraction(value: Any, from_env: bool) -> float:
    if from_env and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ValueError(f"expected a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise ValueError(f"expected a number in [0, 1), got {value!r}")
    return float(value)


def _duration(value: Any, from_env: bool) -> float:
    return parse_duration(value)


def _positive_duration(value: Any, from_env: bool) -> float:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(f"must be longer than zero, got {value!r}")
    return seconds


def _bool(value: Any, from_env: bool) -> bool:
    if from_env and isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _str(*choices: str) -> Reader:
    def read(value: Any, from_env: bool) -> str:
        if not isinstance(value, str) or not value:
            raise ValueError(f"expected a non-empty string, got {value!r}")
        if choices and value.lower() not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}, got {value!r}")
        return value.lower() if choices else value

    return read


LIST_FORMS = 'a,b or an array such as ["a", "b"]'
"""How a list setting may be written in an ``ODFD_*`` variable or ``odfd config set``."""


def parse_list_text(text: str) -> list[str]:
    """A list of strings typed as text: ``a,b`` or a TOML/JSON array (``["a", "b"]``).

    Text that is neither (an array that does not parse, brackets or quotes inside a comma list)
    is refused rather than guessed at: ``'["a","b"]'`` read as one comma item would silently
    make a single entry holding the brackets.
    """
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            items = tomllib.loads(f"value = {stripped}")["value"]
        except tomllib.TOMLDecodeError:
            raise ValueError(f"{text!r} is not an array of strings (use {LIST_FORMS})") from None
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            raise ValueError(f"{text!r} is not an array of strings (use {LIST_FORMS})")
        return items
    items = [item.strip() for item in stripped.split(",") if item.strip()]
    if any(mark in item for item in items for mark in "[]\"'"):
        raise ValueError(f"{text!r} is ambiguous (use {LIST_FORMS})")
    return items


def _str_list(value: Any, from_env: bool) -> list[str]:
    if from_env and isinstance(value, str):
        value = parse_list_text(value)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError(f"expected a list of non-empty strings, got {value!r}")
    return value


def _str_table(value: Any, from_env: bool) -> Mapping[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v for k, v in value.items()
    ):
        raise ValueError("expected a table of strings")
    return MappingProxyType(dict(value))


def _str_or_empty(value: Any, from_env: bool) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


_S3_REMOTE_KEYS = {f.name for f in fields(S3Credentials)}


def _s3_remotes(value: Any, from_env: bool) -> Mapping[str, S3Credentials]:
    """``{"s3+http://host:port/bucket/": {access_key_id = ..., secret_access_key = ...}}``."""
    if not isinstance(value, dict):
        raise ValueError("expected tables keyed by S3 URL prefix")
    remotes = {}
    for prefix, entry in value.items():
        if not is_s3_url(prefix):
            raise ValueError(f"{prefix!r} is not an s3://, s3+http:// or s3+https:// URL prefix")
        if not isinstance(entry, dict) or not all(isinstance(v, str) for v in entry.values()):
            raise ValueError(f"[s3.remotes.{prefix!r}] must be a table of strings")
        unknown = sorted(set(entry) - _S3_REMOTE_KEYS)
        if unknown:
            raise ValueError(
                f"[s3.remotes.{prefix!r}] unknown key(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(_S3_REMOTE_KEYS))}"
            )
        if bool(entry.get("access_key_id")) != bool(entry.get("secret_access_key")):
            raise ValueError(
                f"[s3.remotes.{prefix!r}] needs both access_key_id and secret_access_key"
            )
        remotes[prefix] = S3Credentials(**entry)
    return MappingProxyType(remotes)


def _storage_url(value: Any, from_env: bool) -> str:
    text = _str_or_empty(value, from_env)
    if text:
        try:
            parse_s3_url(text)
        except ParseError as err:
            raise ValueError(
                f"{err} (leave it empty for the workspace's datasets/ folder)"
            ) from None
    return text


def _signing_key(value: Any, from_env: bool) -> bytes:
    try:
        key = bytes.fromhex(_str()(value, from_env))
    except ValueError:
        raise ValueError("must be hex") from None
    if len(key) < 16:
        raise ValueError("must be at least 16 bytes (32 hex digits)")
    return key


def _base_url(value: Any, from_env: bool) -> str:
    return _str()(value, from_env).rstrip("/") + "/"


def _alias_patterns(value: Any, from_env: bool) -> tuple[DatasetAliasPattern, ...]:
    from protocol.identity import DatasetAliasPattern  # here: most nodes set no pattern

    try:
        return tuple(DatasetAliasPattern.parse(text) for text in _str_list(value, from_env))
    except ParseError as err:
        raise ValueError(str(err)) from None


_SECTIONS: dict[str, tuple[type, dict[str, Reader]]] = {
    "server": (
        ServerConfig,
        {
            "address": _str(),
            "port": _int(0, 65535),
            "push_tokens": _str_list,
            "url_signing_key": _signing_key,
            "url_ttl_seconds": _int(1),
            "base_url": _base_url,
            "private": _alias_patterns,
            "read_tokens": _str_list,
            "admin_tokens": _str_list,
            "flight_sql_port": _int(0, 65535),
            "flight_sql_allow_anonymous": _bool,
            "query_timeout": _positive_duration,
            "query_max_rows": _int(1),
            "node_key": _str(),
            "upload_max_bytes": _int(1),
            "upload_ttl": _positive_duration,
        },
    ),
    "ipfs": (
        IpfsConfig,
        {
            "api": _str(),
            "gateway": _str(),
            "pin": _bool,
            "record_validity": _positive_duration,
            "republish_interval": _positive_duration,
        },
    ),
    "s3": (
        S3Config,
        {
            "region": _str_or_empty,
            "profile": _str_or_empty,
            "retries": _int(0, 20),
            "remotes": _s3_remotes,
        },
    ),
    "storage": (StorageConfig, {"url": _storage_url, "cache_mb": _int(1)}),
    "sync": (
        SyncConfig,
        {
            "default_interval": _positive_duration,
            "jitter": _fraction,
            "max_concurrent": _int(1),
            "max_per_peer": _int(1),
            "peer_connections": _int(1),
            "parallel_objects": _int(1),
            "backoff_initial": _positive_duration,
            "backoff_max": _positive_duration,
            "attempt_timeout": _positive_duration,
            "startup_spread": _duration,
            "history": _positive_duration,
            "transform_derivatives": _bool,
            "freeze_after": _duration,
            "tokens": _str_table,
            "connect_timeout": _positive_duration,
            "first_byte_timeout": _positive_duration,
            "min_rate": _int(0),
            "rate_window": _positive_duration,
            "operation_timeout": _duration,
        },
    ),
    "audit": (
        AuditConfig,
        {
            "after_sync": _bool,
            "interval": _duration,
            "max_concurrent": _int(1),
            "jobs": _int(1),
            "withhold_failing": _bool,
            "keep_reports": _int(1),
        },
    ),
    "daemon": (
        DaemonConfig,
        {
            "admin_socket": _str(),
            "blocking_threads": _int(2),
            "spark_jobs": _int(1),
            "spark_connect": _bool,
            "spark_connect_port": _int(0, 65535),
            "shutdown_timeout": _duration,
            "reconcile_interval": _positive_duration,
            "resign_interval": _duration,
        },
    ),
    "log": (
        LogConfig,
        {"format": _str("text", "json"), "level": _str("debug", "info", "warning", "error")},
    ),
    "metrics": (MetricsConfig, {"enabled": _bool}),
}
_FILE_ONLY = {("sync", "tokens"), ("s3", "remotes")}
_SPARK_ENV_KEYS = (
    "master",
    "remote",
    "driver_memory",
    "local_dir",
    "app_name",
    "shared_filesystem",
)
#: The table of the Spark engine's settings (``SparkSettings``, read by the engine's own parser).
_SPARK_TABLE = "spark"
_OTHER_TABLES = {"workspace", _SPARK_TABLE}
WORKSPACE_VERSION = 1
"""The workspace layout this odfd reads (``[workspace] version``)."""


# --- single settings (``odfd config``) ------------------------------------------------------------


def setting_keys() -> list[str]:
    """Every scalar setting as ``section.key`` (nested tables are edited in the file)."""
    keys = [
        f"{section}.{key}"
        for section, (_, readers) in _SECTIONS.items()
        for key in readers
        if (section, key) not in _FILE_ONLY
    ]
    return sorted(keys + [f"spark.{key}" for key in _SPARK_ENV_KEYS])


def setting_default(section: str, key: str) -> Any:
    kind = SparkSettings if section == _SPARK_TABLE else _SECTIONS[section][0]
    return getattr(kind(), key)


def is_duration(section: str, key: str) -> bool:
    readers = _SECTIONS.get(section, (None, {}))[1]
    return readers.get(key) in (_duration, _positive_duration)


# --- environment variables ----------------------------------------------------------------------

OTHER_ENV = frozenset(
    {
        "ODFD_HOME",  # the workspace folder
        "ODFD_NO_DAEMON",  # run engine commands in the CLI process, never in the daemon
        "ODFD_VERBOSE",  # as -v: tracebacks and engine detail on errors
        "ODFD_CRASH_AT",  # fault tests: named points where the process kills itself
        "ODFD_TOKEN",  # bearer token for pulls and pushes
        "ODFD_CACHE_DIR",  # where the Spark plugin jar is built
        "ODFD_JSIPFS",  # the IPFS node program
        "ODFD_IPFS_PEER_ID",  # printed by the IPFS node helper for the shell
        "ODFD_IPFS_PID",
        "ODFD_IPFS_SWARM",
    }
)


def known_environment() -> frozenset[str]:
    """Every ``ODFD_*`` variable odfd reads."""
    names = {
        f"{ENV_PREFIX}{section.upper()}_{key.upper()}"
        for section, (_, readers) in _SECTIONS.items()
        for key in readers
        if (section, key) not in _FILE_ONLY
    }
    names |= {f"{ENV_PREFIX}SPARK_{key.upper()}" for key in _SPARK_ENV_KEYS}
    return frozenset(names | OTHER_ENV)


def unknown_environment(env: Mapping[str, str] | None = None) -> list[tuple[str, str | None]]:
    """``ODFD_*`` variables odfd does not read (a typo would otherwise be silently ignored),
    each with the closest known name if there is one."""
    env = os.environ if env is None else env
    known = known_environment()
    unknown = sorted(name for name in env if name.startswith(ENV_PREFIX) and name not in known)
    if not unknown:
        return []
    import difflib  # every command runs this check: only a typo pays for the suggestion

    return [
        (name, next(iter(difflib.get_close_matches(name, known, n=1, cutoff=0.75)), None))
        for name in unknown
    ]


# --- loading --------------------------------------------------------------------------------------


def load_config(path: Path | None, env: Mapping[str, str] | None = None) -> NodeConfig:
    """The configuration in ``path`` (a missing file means all defaults) with ``env``
    (default: ``os.environ``) overriding it."""
    env = os.environ if env is None else env
    document: dict[str, Any] = {}
    where = str(path) if path is not None else "<no config file>"
    if path is not None and path.is_file():
        try:
            with open(path, "rb") as file:
                document = tomllib.load(file)
        except tomllib.TOMLDecodeError as err:
            raise ConfigError(f"{path}: invalid TOML: {err}") from None
    unknown = sorted(set(document) - set(_SECTIONS) - _OTHER_TABLES)
    if unknown:
        raise ConfigError(
            f"{where}: unknown section(s) {', '.join(f'[{name}]' for name in unknown)}; "
            f"known: {', '.join(f'[{name}]' for name in sorted({*_SECTIONS, *_OTHER_TABLES}))}"
        )
    values: dict[str, Any] = {}
    for section, (kind, readers) in _SECTIONS.items():
        values[section] = _load_section(
            section, kind, readers, _table(document, section, where), where, env
        )
    values["spark"] = _load_spark(_table(document, "spark", where), where, env)
    _check_workspace(_table(document, "workspace", where), where)
    if values["storage"].url and values["ipfs"].pin:
        raise ConfigError(
            f"{where}: [ipfs] pin adds dataset folders to IPFS, but [storage] url keeps the "
            "datasets in a bucket; set one of them off"
        )
    return NodeConfig(**values)


def _table(document: dict[str, Any], section: str, where: str) -> dict[str, Any]:
    table = document.get(section, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: [{section}] must be a table")
    return table


def _load_section(
    section: str,
    kind: type,
    readers: dict[str, Reader],
    table: dict[str, Any],
    where: str,
    env: Mapping[str, str],
) -> Any:
    unknown = sorted(set(table) - set(readers))
    if unknown:
        raise ConfigError(
            f"{where}: [{section}] unknown key(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(readers))}"
        )
    config = kind()
    names = {f.name for f in fields(kind)}
    for key, read in readers.items():
        variable = f"{ENV_PREFIX}{section.upper()}_{key.upper()}"
        if (section, key) not in _FILE_ONLY and variable in env:
            raw, source, from_env = env[variable], f"environment variable {variable}", True
        elif key in table:
            raw, source, from_env = table[key], f"{where}: [{section}] {key}", False
        else:
            continue
        try:
            value = read(raw, from_env)
        except ValueError as err:
            raise ConfigError(f"{source}: {err}") from None
        if key in ("push_tokens", "read_tokens", "admin_tokens"):
            value = frozenset(value)
        assert key in names  # every reader names a field of its section
        config = replace(config, **{key: value})
    return _check_section(section, config, where)


def _check_workspace(table: dict[str, Any], where: str) -> None:
    """``[workspace] version``, written by ``odfd init``: the layout this odfd reads is version
    1, so a workspace of another version is refused rather than misread."""
    unknown = sorted(set(table) - {"version"})
    if unknown:
        raise ConfigError(
            f"{where}: [workspace] unknown key(s) {', '.join(unknown)}; known: version"
        )
    version = table.get("version", WORKSPACE_VERSION)
    if type(version) is not int or version != WORKSPACE_VERSION:
        raise ConfigError(
            f"{where}: [workspace] version {version!r}: this odfd reads workspaces of version "
            f"{WORKSPACE_VERSION}"
        )


def _check_section(section: str, config: Any, where: str) -> Any:
    if isinstance(config, SyncConfig) and config.backoff_initial > config.backoff_max:
        raise ConfigError(
            f"{where}: [sync] backoff_initial ({format_duration(config.backoff_initial)}) "
            f"is longer than backoff_max ({format_duration(config.backoff_max)})"
        )
    return config


def _load_spark(table: dict[str, Any], where: str, env: Mapping[str, str]) -> SparkSettings:
    table = dict(table)
    from_env: dict[str, str] = {}
    for key in _SPARK_ENV_KEYS:
        variable = f"{ENV_PREFIX}SPARK_{key.upper()}"
        if variable in env:
            table[key] = env[variable]
            from_env[f"[spark].{key}:"] = variable
    try:
        return SparkSettings.from_config(table)
    except SparkConfigError as err:
        source = next(
            (f"environment variable {v}" for k, v in from_env.items() if k in str(err)), where
        )
        raise ConfigError(f"{source}: {err}") from None
