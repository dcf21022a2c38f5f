"""Fetch step of a polling source: one module per kind of step behind the ``Fetcher`` seam."""

from __future__ import annotations

from odfd.ingest.fetch.base import (
    KIND_ETAG,
    KIND_LAST_MODIFIED,
    POLLING_SOURCE_NAME,
    Fetched,
    Fetcher,
)
from odfd.ingest.fetch.registry import fetch

__all__ = [
    "KIND_ETAG",
    "KIND_LAST_MODIFIED",
    "POLLING_SOURCE_NAME",
    "Fetched",
    "Fetcher",
    "fetch",
]
