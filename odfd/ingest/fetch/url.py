"""FetchStep::Url: an HTTP(S) download or a local ``file://`` file.

An HTTP source remembers its ``ETag`` (or ``Last-Modified``) and asks the server to answer "not
modified"; a local file remembers its modification time.
"""

from __future__ import annotations

import shutil
import urllib.error
import urllib.parse
import urllib.request
import uuid
from email.utils import format_datetime, parsedate_to_datetime
from pathlib import Path

from odfd.ingest.errors import FetchError, IngestError, UnsupportedError
from odfd.ingest.fetch.base import (
    CHUNK,
    KIND_ETAG,
    KIND_LAST_MODIFIED,
    POLLING_SOURCE_NAME,
    Fetched,
)
from odfd.ingest.template import render
from protocol.errors import ParseError
from protocol.model import (
    EventTimeSourceFromPath,
    EventTimeSourceFromSystemTime,
    FetchStepUrl,
    SourceState,
    Timestamp,
)

HTTP_TIMEOUT_SECONDS = 60


class UrlFetcher:
    """Fetches ``FetchStepUrl`` sources."""

    def fetch(
        self,
        step: FetchStepUrl,
        prev_state: SourceState | None,
        work_dir: Path,
        system_time: Timestamp,
    ) -> Fetched | None:
        return _fetch_url(step, prev_state, work_dir, system_time)


def _fetch_url(
    step: FetchStepUrl, prev: SourceState | None, work_dir: Path, now: Timestamp
) -> Fetched | None:
    url = render(step.url, "fetch.url")
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme == "file":
        path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
        return _fetch_file(path, step.event_time, prev, now)
    if scheme in ("http", "https"):
        return _fetch_http(url, step, prev, work_dir, now)
    raise UnsupportedError(
        f"fetch.url: scheme '{scheme}' of {url} is not supported (http, https, file)"
    )


def _fetch_file(
    path: Path, event_time: object, prev: SourceState | None, now: Timestamp
) -> Fetched | None:
    if isinstance(event_time, EventTimeSourceFromPath):
        raise IngestError(
            "fetch.url: a file:// source cannot take its event time fromPath; use fromMetadata"
        )
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise FetchError(f"fetch.url: file {path} does not exist") from None
    if not path.is_file():
        raise FetchError(f"fetch.url: {path} is not a file")
    modified = Timestamp.from_epoch_millis(round(stat.st_mtime_ns / 1_000_000))
    state = SourceState(
        source_name=POLLING_SOURCE_NAME, kind=KIND_LAST_MODIFIED, value=modified.to_rfc3339()
    )
    if prev is not None and prev.kind == KIND_LAST_MODIFIED and _parse_state_time(prev) == modified:
        return None
    source_time = now if isinstance(event_time, EventTimeSourceFromSystemTime) else modified
    return Fetched(path, False, state, source_time, has_more=False)


def _fetch_http(
    url: str, step: FetchStepUrl, prev: SourceState | None, work_dir: Path, now: Timestamp
) -> Fetched | None:
    if isinstance(step.event_time, EventTimeSourceFromPath):
        raise IngestError(f"fetch.url: an HTTP source ({url}) cannot take its event time fromPath")
    headers = {h.name: render(h.value, f"fetch.headers.{h.name}") for h in step.headers or ()}
    if prev is not None and prev.kind == KIND_ETAG:
        headers["If-None-Match"] = prev.value
    elif prev is not None and prev.kind == KIND_LAST_MODIFIED:
        headers["If-Modified-Since"] = format_datetime(
            _parse_state_time(prev).to_datetime(), usegmt=True
        )
    request = urllib.request.Request(url, headers=headers)
    work_dir.mkdir(parents=True, exist_ok=True)
    target = work_dir / f"fetch-{uuid.uuid4().hex}"
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_SECONDS) as response:
            etag = response.headers.get("ETag")
            last_modified = response.headers.get("Last-Modified")
            with open(target, "wb") as out:
                shutil.copyfileobj(response, out, CHUNK)
    except urllib.error.HTTPError as err:
        if err.code == 304:
            return None
        detail = "not found" if err.code == 404 else f"HTTP {err.code} {err.reason}"
        raise FetchError(f"fetch.url: {url}: {detail}") from None
    except (urllib.error.URLError, OSError) as err:
        target.unlink(missing_ok=True)
        raise FetchError(
            f"fetch.url: {url} is unreachable: {getattr(err, 'reason', err)}"
        ) from None

    modified = _http_time(last_modified, url) if last_modified else None
    state = None
    if etag:
        state = SourceState(source_name=POLLING_SOURCE_NAME, kind=KIND_ETAG, value=etag)
    elif modified is not None:
        state = SourceState(
            source_name=POLLING_SOURCE_NAME, kind=KIND_LAST_MODIFIED, value=modified.to_rfc3339()
        )
    source_time: Timestamp | None
    if isinstance(step.event_time, EventTimeSourceFromSystemTime):
        source_time = now
    else:
        source_time = modified
    return Fetched(target, True, state, source_time, has_more=False)


def _parse_state_time(state: SourceState) -> Timestamp:
    try:
        return Timestamp.parse_rfc3339(state.value)
    except ParseError:
        raise IngestError(
            f"source state {state.kind} has an invalid time {state.value!r}"
        ) from None


def _http_time(text: str, url: str) -> Timestamp:
    try:
        return Timestamp.from_datetime(parsedate_to_datetime(text))
    except (TypeError, ValueError, ParseError):
        raise FetchError(
            f"fetch.url: {url} sent an invalid Last-Modified header {text!r}"
        ) from None
