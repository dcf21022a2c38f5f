"""Which fetcher runs which kind of fetch step.

Fetcher modules are imported on first use, so a fetcher's client library (paho-mqtt for MQTT, ...)
loads only in a process that pulls a source of its kind.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from odfd.ingest.errors import UnsupportedError
from odfd.ingest.fetch.base import Fetched, Fetcher
from protocol.model import (
    FetchStepContainer,
    FetchStepEthereumLogs,
    FetchStepFilesGlob,
    FetchStepMqtt,
    FetchStepUrl,
    SourceState,
    Timestamp,
)

#: Step type → (module, class) of its fetcher; the class is built with no arguments.
FETCHERS: dict[type[Any], tuple[str, str]] = {
    FetchStepUrl: ("odfd.ingest.fetch.url", "UrlFetcher"),
    FetchStepFilesGlob: ("odfd.ingest.fetch.files_glob", "FilesGlobFetcher"),
    FetchStepMqtt: ("odfd.ingest.fetch.mqtt", "MqttFetcher"),
    FetchStepContainer: ("odfd.ingest.fetch.container", "ContainerFetcher"),
    FetchStepEthereumLogs: ("odfd.ingest.fetch.ethereum", "EthereumLogsFetcher"),
}

_loaded: dict[type[Any], Fetcher[Any]] = {}


def _kind(step_type: type[Any]) -> str:
    return step_type.__name__.removeprefix("FetchStep")


def fetcher_for(step_type: type[Any]) -> Fetcher[Any]:
    """The fetcher of a kind of step; ``UnsupportedError`` if odfd has none."""
    fetcher = _loaded.get(step_type)
    if fetcher is None:
        where = FETCHERS.get(step_type)
        if where is None:
            supported = ", ".join(_kind(t) for t in FETCHERS)
            raise UnsupportedError(
                f"fetch step {_kind(step_type)} is not supported by odfd (supported: {supported})"
            )
        module, name = where
        fetcher = _loaded[step_type] = getattr(importlib.import_module(module), name)()
    return fetcher


def fetch(
    step: object, prev_state: SourceState | None, work_dir: Path, system_time: Timestamp
) -> Fetched | None:
    """Fetches the next data of ``step``; ``None`` when the source has nothing new."""
    return fetcher_for(type(step)).fetch(step, prev_state, work_dir, system_time)
