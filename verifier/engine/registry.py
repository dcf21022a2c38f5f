"""Chooses the engine a transform names: ``spark`` or ``datafusion``, case-insensitively.

Engines are imported only when chosen, so a DataFusion query never loads PySpark (or starts a
JVM), and adding an engine is one entry here plus its module.
"""

from __future__ import annotations

import importlib

from protocol.model import TransformSql
from verifier.engine.base import Engine
from verifier.engine.transform import UnsupportedTransformError, validate_transform

#: Engine name -> "module:class" implementing :class:`verifier.engine.base.Engine`.
_ENGINES = {
    "spark": "verifier.engine.spark_engine:SparkEngine",
    "datafusion": "verifier.engine.datafusion_engine:DataFusionEngine",
}

ENGINE_NAMES = tuple(sorted(_ENGINES))


class EngineNotAvailableError(UnsupportedTransformError):
    """The transform names an engine odfd does not have (Flink, RisingWave, anything unknown)."""

    def __init__(self, message: str, engine: str) -> None:
        super().__init__(message)
        self.engine = engine


def engine_named(name: str, what: str = "") -> Engine:
    """The engine called ``name`` (any case); ``what`` prefixes the error naming the dataset."""
    target = _ENGINES.get(name.lower())
    if target is None:
        prefix = f"{what}: " if what else ""
        raise EngineNotAvailableError(
            f"{prefix}the transform uses engine '{name}', which odfd cannot run "
            f"(it runs {', '.join(ENGINE_NAMES)})",
            name,
        )
    module_name, class_name = target.split(":")
    engine: Engine = getattr(importlib.import_module(module_name), class_name)()
    return engine


def engine_for(transform: object, what: str) -> tuple[TransformSql, Engine]:
    """Checks ``transform`` and picks the engine it names; errors start with ``what``."""
    sql = validate_transform(transform, what, engine=None)
    return sql, engine_named(sql.engine, what)
