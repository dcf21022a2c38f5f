"""Fetch and prepare steps against real files, a real HTTP server on loopback and real tools."""

from __future__ import annotations

import gzip
import http.server
import os
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from odfd.ingest.errors import FetchError, IngestError, PrepareError, UnsupportedError
from odfd.ingest.event_time import event_time_from_path, parse_time
from odfd.ingest.fetch import KIND_ETAG, KIND_LAST_MODIFIED, fetch
from odfd.ingest.prepare import prepare
from protocol.model import (
    CompressionFormat,
    EventTimeSourceFromMetadata,
    EventTimeSourceFromPath,
    EventTimeSourceFromSystemTime,
    FetchStepFilesGlob,
    FetchStepUrl,
    PrepStepDecompress,
    PrepStepPipe,
    RequestHeader,
    SourceOrdering,
    SourceState,
    Timestamp,
)

NOW = Timestamp.of(2024, 6, 1, 12)


class _Handler(http.server.BaseHTTPRequestHandler):
    body = b"a,b\n1,2\n"
    seen_headers: list[dict[str, str]] = []

    def do_GET(self) -> None:
        type(self).seen_headers.append(dict(self.headers))
        if self.path == "/etag.csv":
            if self.headers.get("If-None-Match") == '"v1"':
                self.send_response(304)
                self.end_headers()
                return
            self._ok({"ETag": '"v1"'})
        elif self.path == "/modified.csv":
            if self.headers.get("If-Modified-Since") == "Sat, 01 Jun 2024 10:00:00 GMT":
                self.send_response(304)
                self.end_headers()
                return
            self._ok({"Last-Modified": "Sat, 01 Jun 2024 10:00:00 GMT"})
        elif self.path == "/auth.csv":
            if self.headers.get("Authorization") != "Bearer s3cret":
                self.send_response(401)
                self.end_headers()
                return
            self._ok({})
        else:
            self.send_response(404)
            self.end_headers()

    def _ok(self, headers: dict[str, str]) -> None:
        self.send_response(200)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_url() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_http_etag_is_source_state_and_304_means_up_to_date(http_url: str, tmp_path: Path) -> None:
    first = fetch(FetchStepUrl(url=f"{http_url}/etag.csv"), None, tmp_path, NOW)
    assert first is not None and first.owned
    assert first.path.read_bytes() == _Handler.body
    assert first.source_state == SourceState(source_name="default", kind=KIND_ETAG, value='"v1"')
    assert first.source_event_time is None  # no Last-Modified: the caller falls back to system time
    assert (
        fetch(FetchStepUrl(url=f"{http_url}/etag.csv"), first.source_state, tmp_path, NOW) is None
    )


def test_http_last_modified_gives_state_and_event_time(http_url: str, tmp_path: Path) -> None:
    step = FetchStepUrl(url=f"{http_url}/modified.csv", event_time=EventTimeSourceFromMetadata())
    first = fetch(step, None, tmp_path, NOW)
    assert first is not None
    assert first.source_event_time == Timestamp.of(2024, 6, 1, 10)
    assert first.source_state == SourceState(
        source_name="default", kind=KIND_LAST_MODIFIED, value="2024-06-01T10:00:00Z"
    )
    assert fetch(step, first.source_state, tmp_path, NOW) is None
    from_system = fetch(
        FetchStepUrl(url=f"{http_url}/modified.csv", event_time=EventTimeSourceFromSystemTime()),
        None,
        tmp_path,
        NOW,
    )
    assert from_system is not None and from_system.source_event_time == NOW


def test_http_headers_are_templated_from_the_environment(
    http_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    step = FetchStepUrl(
        url=f"{http_url}/auth.csv",
        headers=(RequestHeader(name="Authorization", value="Bearer ${{ env.ODFD_TEST_TOKEN }}"),),
    )
    with pytest.raises(IngestError, match="ODFD_TEST_TOKEN is not set"):
        fetch(step, None, tmp_path, NOW)
    monkeypatch.setenv("ODFD_TEST_TOKEN", "s3cret")
    assert fetch(step, None, tmp_path, NOW) is not None


def test_url_templates_take_alternatives_and_defaults(
    http_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kamu-cli's fetch ``template_url`` / ``template_headers``: ``env.A || env.B || 'literal'``."""
    monkeypatch.delenv("ODFD_TEST_A", raising=False)
    monkeypatch.delenv("ODFD_TEST_B", raising=False)
    step = FetchStepUrl(url=f"{http_url}/${{{{ env.ODFD_TEST_A || env.ODFD_TEST_B }}}}")
    with pytest.raises(
        IngestError, match="fetch.url: environment variable ODFD_TEST_A or ODFD_TEST_B"
    ):
        fetch(step, None, tmp_path, NOW)
    monkeypatch.setenv("ODFD_TEST_B", "modified.csv")
    assert fetch(step, None, tmp_path, NOW) is not None
    with_default = FetchStepUrl(
        url=f"{http_url}/${{{{ env.ODFD_TEST_A || 'modified.csv' }}}}",
        headers=(RequestHeader(name="X-Trace", value="${{ env.ODFD_TEST_A || 42 }}"),),
    )
    assert fetch(with_default, None, tmp_path, NOW) is not None


def test_http_errors_name_the_url(http_url: str, tmp_path: Path) -> None:
    with pytest.raises(FetchError, match=r"missing\.csv: not found"):
        fetch(FetchStepUrl(url=f"{http_url}/missing.csv"), None, tmp_path, NOW)
    with pytest.raises(FetchError, match="HTTP 401"):
        fetch(FetchStepUrl(url=f"{http_url}/auth.csv"), None, tmp_path, NOW)
    with pytest.raises(FetchError, match="unreachable"):
        fetch(FetchStepUrl(url="http://127.0.0.1:1/x.csv"), None, tmp_path, NOW)


def test_file_url_uses_modification_time(tmp_path: Path) -> None:
    data = tmp_path / "data.csv"
    data.write_text("a\n1\n")
    os.utime(data, (0, 1_700_000_000.25))
    step = FetchStepUrl(url=data.as_uri())
    first = fetch(step, None, tmp_path / "work", NOW)
    assert first is not None and first.path == data and not first.owned
    assert first.source_event_time == Timestamp.from_epoch_millis(1_700_000_000_250)
    assert fetch(step, first.source_state, tmp_path / "work", NOW) is None
    os.utime(data, (0, 1_700_000_100))
    assert fetch(step, first.source_state, tmp_path / "work", NOW) is not None
    with pytest.raises(FetchError, match="does not exist"):
        fetch(FetchStepUrl(url=(tmp_path / "nope.csv").as_uri()), None, tmp_path, NOW)


def test_files_glob_takes_files_one_by_one_in_name_order(tmp_path: Path) -> None:
    for name in ("b-2024-01-03.csv", "a-2024-01-05.csv", "c-2024-01-01.csv"):
        (tmp_path / name).write_text("x\n")
    step = FetchStepFilesGlob(
        path=str(tmp_path / "*.csv"),
        event_time=EventTimeSourceFromPath(
            pattern=r"(\d{4}-\d{2}-\d{2})", timestamp_format="yyyy-MM-dd"
        ),
    )
    taken, state = [], None
    while (result := fetch(step, state, tmp_path, NOW)) is not None:
        taken.append((result.path.name, result.source_event_time, result.has_more))
        state = result.source_state
    assert taken == [
        ("a-2024-01-05.csv", Timestamp.of(2024, 1, 5), True),
        ("b-2024-01-03.csv", Timestamp.of(2024, 1, 3), True),
        ("c-2024-01-01.csv", Timestamp.of(2024, 1, 1), False),
    ]
    by_time = FetchStepFilesGlob(
        path=step.path, event_time=step.event_time, order=SourceOrdering.BY_EVENT_TIME
    )
    first = fetch(by_time, None, tmp_path, NOW)
    assert first is not None and first.path.name == "c-2024-01-01.csv"
    with pytest.raises(FetchError, match="no files match"):
        fetch(FetchStepFilesGlob(path=str(tmp_path / "*.json")), None, tmp_path, NOW)


class FetchStepCarrierPigeon:
    """A fetch step no fetcher is registered for."""


def test_unknown_fetch_steps_and_url_schemes_are_not_supported(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedError, match="fetch step CarrierPigeon is not supported"):
        fetch(FetchStepCarrierPigeon(), None, tmp_path, NOW)
    with pytest.raises(UnsupportedError, match="scheme 'ftp'"):
        fetch(FetchStepUrl(url="ftp://example.org/x.csv"), None, tmp_path, NOW)


def test_event_time_formats() -> None:
    assert parse_time("20240102", "yyyyMMdd", "x") == Timestamp.of(2024, 1, 2)
    assert parse_time("2024-01-02 03:04", "%Y-%m-%d %H:%M", "x") == Timestamp.of(2024, 1, 2, 3, 4)
    assert parse_time("2024-01-02T03:04:05Z", None, "x") == Timestamp.of(2024, 1, 2, 3, 4, 5)
    source = EventTimeSourceFromPath(pattern=r"data_(\d+)\.csv")
    with pytest.raises(IngestError, match="does not match the timestamp format"):
        event_time_from_path(source, "data_17.csv")
    with pytest.raises(IngestError, match="does not match 'other.csv'"):
        event_time_from_path(source, "other.csv")


def test_decompress_gzip_and_zip_with_sub_path(tmp_path: Path) -> None:
    gz = tmp_path / "data.csv.gz"
    gz.write_bytes(gzip.compress(b"a,b\n1,2\n"))
    [out] = prepare([PrepStepDecompress(format=CompressionFormat.GZIP)], gz, tmp_path / "work")
    assert out.read_bytes() == b"a,b\n1,2\n"

    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("readme.txt", "hello")
        zf.writestr("data/part-1.csv", "x\n1\n")
        zf.writestr("data/part-2.json", "{}")
    [out] = prepare(
        [PrepStepDecompress(format=CompressionFormat.ZIP, sub_path="data/*.csv")],
        archive,
        tmp_path / "w",
    )
    assert out.read_text() == "x\n1\n"
    with pytest.raises(PrepareError, match="matches several entries"):
        prepare(
            [PrepStepDecompress(format=CompressionFormat.ZIP, sub_path="data/*")],
            archive,
            tmp_path / "w",
        )
    with pytest.raises(PrepareError, match="not a valid gzip file"):
        prepare([PrepStepDecompress(format=CompressionFormat.GZIP)], archive, tmp_path / "w")


def test_pipe_runs_a_command_and_reports_its_failure(tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("b\na\n")
    steps = [PrepStepPipe(command=("sort",)), PrepStepPipe(command=("tr", "a-z", "A-Z"))]
    created = prepare(steps, source, tmp_path / "work")
    assert created[-1].read_text() == "A\nB\n"
    before = set((tmp_path / "work").iterdir())
    with pytest.raises(PrepareError, match=r"exited with code 3: boom"):
        prepare(
            [PrepStepPipe(command=("sh", "-c", "echo boom >&2; exit 3"))], source, tmp_path / "work"
        )
    assert set((tmp_path / "work").iterdir()) == before  # a failed step leaves nothing behind


def test_fetchers_load_their_client_libraries_only_when_used() -> None:
    probe = (
        "import sys, odfd.coordinator.ingest\n"
        "from odfd.ingest.fetch.registry import fetcher_for\n"
        "from protocol.model import FetchStepMqtt\n"
        "before = 'paho' in sys.modules\n"
        "fetcher_for(FetchStepMqtt)\n"
        "print(before, 'paho' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "True"]
