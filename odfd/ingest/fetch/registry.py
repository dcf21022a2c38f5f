"""Which fetcher runs which kind of fetch step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from odfd.ingest.errors import UnsupportedError
from odfd.ingest.fetch.base import Fetched, Fetcher
from odfd.ingest.fetch.container import ContainerFetcher
from odfd.ingest.fetch.ethereum import EthereumLogsFetcher
from odfd.ingest.fetch.files_glob import FilesGlobFetcher
from odfd.ingest.fetch.mqtt import MqttFetcher
from odfd.ingest.fetch.url import UrlFetcher
from protocol.model import (
    FetchStepContainer,
    FetchStepEthereumLogs,
    FetchStepFilesGlob,
    FetchStepMqtt,
    FetchStepUrl,
    SourceState,
    Timestamp,
)

FETCHERS: dict[type[Any], Fetcher[Any]] = {
    FetchStepUrl: UrlFetcher(),
    FetchStepFilesGlob: FilesGlobFetcher(),
    FetchStepMqtt: MqttFetcher(),
    FetchStepContainer: ContainerFetcher(),
    FetchStepEthereumLogs: EthereumLogsFetcher(),
}


def _kind(step_type: type[Any]) -> str:
    return step_type.__name__.removeprefix("FetchStep")


def fetch(
    step: object, prev_state: SourceState | None, work_dir: Path, system_time: Timestamp
) -> Fetched | None:
    """Fetches the next data of ``step``; ``None`` when the source has nothing new."""
    fetcher = FETCHERS.get(type(step))
    if fetcher is None:
        supported = ", ".join(_kind(t) for t in FETCHERS)
        raise UnsupportedError(
            f"fetch step {_kind(type(step))} is not supported by odfd (supported: {supported})"
        )
    return fetcher.fetch(step, prev_state, work_dir, system_time)
