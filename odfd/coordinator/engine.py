"""Configures the process's Spark engine from the workspace's ``config.toml``.

The ``[spark]`` table holds the operator's choices (see ``verifier.engine.settings.SparkSettings``)::

    [spark]
    master = "local[*]"          # or spark://host:7077, ...
    driver_memory = "4g"
    local_dir = "/fast/scratch"
    [spark.conf]                 # any other Spark setting odfd does not pin
    "spark.executor.memory" = "8g"
"""

from __future__ import annotations

from pathlib import Path

from odfd.config import load_config
from verifier.engine import session
from verifier.engine.settings import SparkSettings


def configure_engine(config_path: Path) -> SparkSettings:
    """Reads ``[spark]`` from ``config_path`` and sets up the (not yet started) Spark session."""
    settings = load_config(config_path).spark
    session.configure(settings)
    return settings
