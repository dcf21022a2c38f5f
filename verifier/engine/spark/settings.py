"""Every Spark setting odfd relies on, in one place.

Three kinds of settings live here:

* :data:`DETERMINISM` pins everything that could change the *records* or their *order* in a
  transform's output. A derivative dataset is only verifiable if re-running a transaction with
  the same inputs reproduces the same logical hash, so these values are part of the engine's
  contract: changing one changes the output of existing transforms and must be treated like an
  engine version bump. They are applied to every session the engine hands out and cannot be
  overridden from the node's configuration.
* :data:`STARTUP` holds the determinism settings that Spark only accepts when the SparkContext
  starts, chief among them odfd's shuffle manager (``verifier.engine.spark.jvm_plugin``), which makes
  reduce tasks read map outputs in map order; without it the order an aggregation or join sees
  its input in depends on which executor's output arrives first.
* :class:`SparkSettings` holds what a node operator may choose (where Spark runs, how much memory
  the driver gets, scratch space) and is read from the ``[spark]`` table of ``config.toml``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path
from types import MappingProxyType

from protocol.frozen import frozen_dataclass
from verifier.engine.spark.jvm_plugin import SHUFFLE_MANAGER
from verifier.errors import VerifierError


class SparkConfigError(VerifierError):
    """The node's Spark configuration is invalid or tries to override a pinned setting."""


#: Number of shuffle partitions of every engine session. Aggregations and joins hash records
#: into this many partitions, and the output is collected partition by partition, so the value
#: fixes the output order of such queries.
SHUFFLE_PARTITIONS = 8

DETERMINISM: Mapping[str, str] = MappingProxyType(
    {
        # Timestamps are interpreted, truncated and printed in UTC, never in the host's zone.
        "spark.sql.session.timeZone": "UTC",
        # `TIMESTAMP` in SQL and DDL means an instant (what ODF stores), not a local date-time.
        "spark.sql.timestampType": "TIMESTAMP_LTZ",
        # Partition counts after shuffles are fixed, not chosen from data sizes at runtime.
        "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
        "spark.sql.adaptive.enabled": "false",
        # Join strategy must not depend on size estimates (broadcast joins change output order).
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        # How files are split into input partitions (transforms narrow this further, see
        # verifier.engine.spark.transform), and never merged into fewer partitions afterwards.
        "spark.sql.files.maxPartitionBytes": "134217728",
        "spark.sql.files.openCostInBytes": "4194304",
        "spark.sql.files.maxPartitionNum": "1000000000",
        # Partitions of tables a query makes up itself (`range(...)`), otherwise the core count.
        "spark.sql.leafNodeDefaultParallelism": str(SHUFFLE_PARTITIONS),
        # SQL semantics: ANSI arithmetic (overflow is an error, not a silent wrap), ANSI store
        # assignment, case-insensitive column resolution, precision-loss rules for decimals.
        "spark.sql.ansi.enabled": "true",
        "spark.sql.storeAssignmentPolicy": "ANSI",
        "spark.sql.caseSensitive": "false",
        "spark.sql.decimalOperations.allowPrecisionLoss": "true",
        "spark.sql.mapKeyDedupPolicy": "EXCEPTION",
        # Legacy behaviours pinned to the modern (proleptic Gregorian, java.time) ones.
        "spark.sql.legacy.timeParserPolicy": "CORRECTED",
        "spark.sql.parquet.datetimeRebaseModeInRead": "CORRECTED",
        "spark.sql.parquet.datetimeRebaseModeInWrite": "CORRECTED",
        "spark.sql.parquet.int96RebaseModeInRead": "CORRECTED",
        "spark.sql.parquet.int96RebaseModeInWrite": "CORRECTED",
        # A CSV record is parsed in full even when a query needs few columns, so a malformed
        # value is reported the same way whatever the query selects.
        "spark.sql.csv.parser.columnPruning.enabled": "false",
        # Results reach Python as Arrow, in the same types every time.
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
        "spark.sql.execution.arrow.useLargeVarTypes": "false",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "65536",
    }
)

#: Determinism settings Spark reads once, when the SparkContext starts.
STARTUP: Mapping[str, str] = MappingProxyType(
    {
        # Reduce tasks read map outputs one after the other in map order (not as they arrive).
        "spark.shuffle.manager": SHUFFLE_MANAGER,
        # Push-based shuffle merges map outputs on remote services in arrival order.
        "spark.shuffle.push.enabled": "false",
    }
)

#: Settings that only make the embedded Spark quiet and self-contained; they do not affect data.
RUNTIME: Mapping[str, str] = MappingProxyType(
    {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.catalogImplementation": "in-memory",
        "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    }
)

_KNOWN_KEYS = frozenset(
    {"master", "remote", "driver_memory", "local_dir", "app_name", "conf", "shared_filesystem"}
)


@frozen_dataclass
class SparkSettings:
    """Operator-chosen Spark settings (the ``[spark]`` table of ``config.toml``).

    ``master`` is any Spark master URL. With ``local[*]`` (the default) the driver and executors
    share one machine. With a cluster master, executors read input slices and fetched files by
    path, so the workspace must be on storage they can reach under the same path (a shared
    mount); output slices are always collected to the driver and written by it.

    ``remote`` (``sc://host:port``) makes the engine a Spark Connect client of that server instead
    of starting a JVM in the process; ``master`` and the memory settings then belong to the
    server (and to a local server odfd starts itself, see ``verifier.engine.spark.connect_server``).

    ``shared_filesystem`` says that server's executors can write into the workspace under the
    same paths: results then come back as Parquet files they write in parallel, instead of
    through the server's one gRPC stream (``verifier.engine.spark.staged``). Off by default: on one
    machine the stream is faster (the files cost Spark more to write than Arrow batches, and the
    client can only start once the last one is written).
    """

    master: str = "local[*]"
    remote: str | None = None
    driver_memory: str | None = None
    local_dir: str | None = None
    app_name: str = "odfd"
    conf: Mapping[str, str] = field(default_factory=dict)
    shared_filesystem: bool = False

    @classmethod
    def from_config(cls, table: Mapping[str, object] | None) -> SparkSettings:
        """Builds settings from the ``[spark]`` table of a node config (missing keys default)."""
        if not table:
            return cls()
        unknown = sorted(set(table) - _KNOWN_KEYS)
        if unknown:
            raise SparkConfigError(f"config [spark]: unknown key(s) {', '.join(unknown)}")
        values: dict[str, object] = {}
        for key in ("master", "remote", "driver_memory", "local_dir", "app_name"):
            if key in table:
                value = table[key]
                if not isinstance(value, str) or not value:
                    raise SparkConfigError(f"config [spark].{key}: expected a non-empty string")
                values[key] = value
        if "shared_filesystem" in table:
            values["shared_filesystem"] = _flag(table["shared_filesystem"])
        conf = table.get("conf", {})
        if not isinstance(conf, Mapping) or not all(
            isinstance(k, str) and isinstance(v, (str, int, float, bool)) for k, v in conf.items()
        ):
            raise SparkConfigError("config [spark].conf: expected a table of Spark settings")
        values["conf"] = {k: _conf_value(v) for k, v in conf.items()}
        settings = cls(**values)  # type: ignore[arg-type]  # values were checked key by key against the fields above
        settings.validate()
        return settings

    def validate(self) -> None:
        if not _MASTER.fullmatch(self.master):
            raise SparkConfigError(
                f"config [spark].master: {self.master!r} is not a Spark master URL "
                "(local, local[*], local[N], spark://HOST:PORT, yarn, k8s://URL)"
            )
        if self.driver_memory is not None and not _MEMORY.fullmatch(self.driver_memory):
            raise SparkConfigError(
                f"config [spark].driver_memory: {self.driver_memory!r} is not a memory size "
                "(a number with an optional unit: 512m, 2g, 4gb)"
            )
        if self.remote is not None and not self.remote.startswith("sc://"):
            raise SparkConfigError(
                f"config [spark].remote: {self.remote!r} is not a Spark Connect URL (sc://host:port)"
            )
        pinned = sorted(k for k in self.conf if k in DETERMINISM or k in _OWNED_KEYS)
        if pinned:
            raise SparkConfigError(
                "config [spark].conf: these settings are fixed by odfd and cannot be "
                f"overridden: {', '.join(pinned)}"
            )

    def spark_conf(self, plugin_jar: Path) -> dict[str, str]:
        """The complete configuration to start a session with, loading odfd's plugin jar.

        The jar goes on the driver's class path (the shuffle manager is created when the driver
        starts) and into ``spark.jars``, which ships it to a cluster's executors.
        """
        self.validate()
        # Results reach Python streamed and spilled to disk (verifier.engine.spark.collect), so Spark's
        # 1 GiB cap on collected results would only stop slices larger than that. An operator
        # may still set a cap.
        conf = {"spark.driver.maxResultSize": "0", **self.conf}
        conf.update(RUNTIME)
        conf.update(DETERMINISM)
        conf.update(STARTUP)
        conf["spark.driver.extraClassPath"] = _joined(
            str(plugin_jar), self.conf.get("spark.driver.extraClassPath"), os.pathsep
        )
        conf["spark.jars"] = _joined(str(plugin_jar), self.conf.get("spark.jars"), ",")
        conf["spark.master"] = self.master
        conf["spark.app.name"] = self.app_name
        if self.driver_memory:
            conf["spark.driver.memory"] = self.driver_memory
        if self.local_dir:
            conf["spark.local.dir"] = self.local_dir
        return conf


# What Spark itself accepts: its master URL forms, and sizes as ``JavaUtils.byteStringAs*`` reads
# them. Checked up front so a typo is named as such instead of as a JVM that failed to start.
_MASTER = re.compile(
    r"local(\[(\*|\d+)(,\d+)?\])?|local-cluster\[\d+, *\d+, *\d+\]"
    r"|(spark|k8s|mesos)://\S+|yarn"
)
_MEMORY = re.compile(r"\d+(b|k|kb|m|mb|g|gb|t|tb|p|pb)?", re.IGNORECASE)

_OWNED_KEYS = frozenset(
    {"spark.master", "spark.app.name", "spark.driver.memory", "spark.local.dir", *RUNTIME, *STARTUP}
)


def _joined(first: str, rest: str | None, separator: str) -> str:
    return f"{first}{separator}{rest}" if rest else first


def _flag(value: object) -> bool:
    """A boolean setting: a TOML boolean, or ``true``/``false`` from an environment variable."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise SparkConfigError(
        f"config [spark].shared_filesystem: expected true or false, got {value!r}"
    )


def _conf_value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
