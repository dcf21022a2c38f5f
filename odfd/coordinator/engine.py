"""The engines of a command's process, built from the workspace's configuration.

One call per process builds them (``verifier.engine.registry.Engines``: the ``[spark]`` settings
and the workspace, where a daemon records its Spark Connect server); everything that runs a
transform, query or ingest is handed them. The node's composition root takes this over.
"""

from __future__ import annotations

from pathlib import Path

from odfd.config import load_config
from verifier.engine.registry import Engines


def open_engines(config_path: Path) -> Engines:
    """The engines for the workspace whose ``config.toml`` is at ``config_path``."""
    return Engines(load_config(config_path).spark, workspace_root=config_path.parent)
