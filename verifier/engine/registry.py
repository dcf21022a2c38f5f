"""The engines of a process, configured once: ``spark`` and ``datafusion``, by name.

:class:`Engines` is built once per process with the node's engine settings (the node's
composition root does it) and passed to whatever runs transforms, queries or ingests. It hands
out each engine already configured, builds it on first request (so a DataFusion query never
imports the Spark engine, let alone PySpark or a JVM) and keeps it for the process. Adding an
engine is one package under ``verifier/engine/`` and one entry in :data:`_FACTORIES`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from protocol.model import TransformSql
from verifier.engine.contract import Engine, IngestEngine, validate_transform
from verifier.engine.errors import EngineNotAvailableError
from verifier.engine.names import ENGINE_NAMES
from verifier.engine.spark.settings import SparkSettings


def _spark(engines: Engines) -> Engine:
    from verifier.engine.spark.engine import SparkEngine

    return SparkEngine(engines.spark_settings, workspace_root=engines.workspace_root)


def _datafusion(engines: Engines) -> Engine:
    from verifier.engine.datafusion.engine import DataFusionEngine

    return DataFusionEngine()


#: Engine name -> how to build it from the process's settings.
_FACTORIES: dict[str, Callable[[Engines], Engine]] = {"spark": _spark, "datafusion": _datafusion}

assert ENGINE_NAMES == tuple(sorted(_FACTORIES)), "verifier.engine.names lists every engine"

#: The engine that ingests files into root datasets.
_INGEST_ENGINE = "spark"


class Engines:
    """The process's engines, by name (any case)."""

    def __init__(
        self, spark_settings: SparkSettings | None = None, *, workspace_root: Path | None = None
    ) -> None:
        """``spark_settings``: the ``[spark]`` table (defaults when ``None``); ``workspace_root``:
        where a daemon records its Spark Connect server for the workspace's commands and where
        engines' logs go (``None``: no workspace, Spark's errors on stderr)."""
        self.spark_settings = spark_settings or SparkSettings()
        self.workspace_root = workspace_root
        self._engines: dict[str, Engine] = {}
        self._lock = threading.Lock()

    def named(self, name: str, what: str = "") -> Engine:
        """The engine called ``name``; ``what`` prefixes the error naming the dataset."""
        key = name.lower()
        factory = _FACTORIES.get(key)
        if factory is None:
            prefix = f"{what}: " if what else ""
            raise EngineNotAvailableError(
                f"{prefix}the transform uses engine '{name}', which odfd cannot run "
                f"(it runs {', '.join(ENGINE_NAMES)})",
                name,
            )
        with self._lock:
            engine = self._engines.get(key)
            if engine is None:
                engine = self._engines[key] = factory(self)
        return engine

    def for_transform(self, transform: object, what: str) -> tuple[TransformSql, Engine]:
        """Checks ``transform`` and picks the engine it names; errors start with ``what``."""
        sql = validate_transform(transform, what)
        return sql, self.named(sql.engine, what)

    def for_ingest(self) -> IngestEngine:
        """The engine that reads, merges and writes ingested data."""
        engine = self.named(_INGEST_ENGINE)
        assert isinstance(engine, IngestEngine), f"engine {engine.name} cannot ingest"
        return engine

    def start(self) -> None:
        """Starts every engine now rather than on first use (a daemon warming up). Blocking."""
        for name in ENGINE_NAMES:
            self.named(name).start()

    def running(self) -> bool:
        """Whether any engine holds process-wide resources (Spark's JVM or Connect session),
        whoever started it."""
        return any(self.named(name).running for name in ENGINE_NAMES)

    def stop(self) -> None:
        """Releases every engine's process-wide resources (an orderly shutdown)."""
        for name in ENGINE_NAMES:
            engine = self.named(name)
            if engine.running:
                engine.stop()
