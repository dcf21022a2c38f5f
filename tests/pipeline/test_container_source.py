"""FetchStep::Container end to end on a real runtime (Podman) with a locally built image."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from odfd.coordinator.ingest import pull_root
from odfd.ingest.errors import FetchError, IngestError
from odfd.ingest.fetch import container, fetch
from protocol.model import EnvVar, FetchStepContainer, SourceState, Timestamp
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_ENGINES
from tests.pipeline.conftest import create, data_events, rows
from verifier.audit import VerifyOptions, verify

pytestmark = pytest.mark.spark

MANIFEST = """
kind: DatasetSnapshot
version: 1
content:
  name: pages
  kind: Root
  metadata:
    - kind: SetPollingSource
      fetch:
        kind: Container
        image: "${{ env.ODFD_TEST_IMAGE }}"
        args:
          - hello
        env:
          - name: SOURCE_VERSION
          - name: GREETING
            value: world
          - name: ODF_BATCH_SIZE
            value: "50"
      read:
        kind: NdJson
        schema:
          fields:
            - name: version
              type: int64
            - name: batch
              type: int64
            - name: greeting
              type: string
      merge:
        kind: Append
"""


async def test_container_source_pages_through_its_etag(
    workspace: Workspace, container_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODFD_TEST_IMAGE", container_image)
    dataset = await create(workspace, MANIFEST)

    monkeypatch.setenv("SOURCE_VERSION", "1")
    [first] = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, 1), engines=TEST_ENGINES
    )
    assert (first.up_to_date, first.num_records) == (False, 1)
    [same] = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, 2), engines=TEST_ENGINES
    )
    assert same.up_to_date and same.reason == "the source has not changed"

    monkeypatch.setenv("SOURCE_VERSION", "3")  # two more pages: the container asks for a rerun
    outcomes = await pull_root(
        workspace, dataset, system_time=Timestamp.of(2024, 7, 3), engines=TEST_ENGINES
    )
    assert [(o.num_records, o.has_more) for o in outcomes] == [(1, True), (1, False)]

    assert await rows(dataset, "version", "batch", "greeting") == [
        (v, 50, "hello world") for v in (1, 2, 3)
    ]
    assert [e.new_source_state for e in await data_events(dataset)] == [
        SourceState(source_name="default", kind="odf/etag", value=v) for v in ("1", "2", "3")
    ]
    report = await verify(workspace, ["pages"], VerifyOptions(jobs=1), engines=TEST_ENGINES)
    assert report.exit_code == 0, report.dumps(None)


async def test_an_image_that_exits_non_zero_commits_nothing(
    workspace: Workspace, container_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ODFD_TEST_IMAGE", container_image)
    dataset = await create(
        workspace,
        MANIFEST.replace(
            "        args:\n          - hello\n",
            '        command: ["/bin/sh", "-c", "echo partial; echo upstream said 503 >&2; exit 3"]\n',
        ),
    )
    head = await dataset.chain.head()
    monkeypatch.setenv("SOURCE_VERSION", "1")
    with pytest.raises(FetchError) as caught:
        await pull_root(workspace, dataset, engines=TEST_ENGINES)
    assert str(caught.value) == (
        f"fetch.container: image {container_image} exited with status 3: upstream said 503"
    )
    assert await dataset.chain.head() == head


def test_last_modified_contract_and_protocol_errors(container_image: str, tmp_path: Path) -> None:
    def step(script: str) -> FetchStepContainer:
        return FetchStepContainer(image=container_image, command=("/bin/sh", "-c", script))

    stamp = 'echo "{\\"at\\": \\"$ODF_LAST_MODIFIED\\"}"; echo 2024-07-01T12:00:00+02:00 > "$ODF_NEW_LAST_MODIFIED_PATH"'
    now = Timestamp.of(2024, 7, 2)
    fetched = fetch(step(stamp), None, tmp_path / "a", now)
    assert fetched is not None and fetched.path.read_text() == '{"at": ""}\n'
    state = SourceState(
        source_name="default", kind="odf/last-modified", value="2024-07-01T10:00:00Z"
    )
    assert fetched.source_state == state
    with pytest.raises(
        FetchError, match="wrote data to stdout but left the source state unchanged"
    ):
        fetch(step(stamp), state, tmp_path / "b", now)  # it echoes the old time back as data
    quiet = 'echo 2024-07-01T10:00:00Z > "$ODF_NEW_LAST_MODIFIED_PATH"'
    assert fetch(step(quiet), state, tmp_path / "c", now) is None
    bad = 'echo yesterday > "$ODF_NEW_LAST_MODIFIED_PATH"'
    with pytest.raises(
        FetchError, match="wrote a last-modified time that is not RFC 3339: 'yesterday'"
    ):
        fetch(step(bad), None, tmp_path / "d", now)
    missing = FetchStepContainer(image=container_image, command=("/bin/no-such-tool",))
    with pytest.raises(FetchError, match=r"^fetch.container: image \S+: podman "):
        fetch(missing, None, tmp_path / "e", now)


def test_bad_step_variables_are_refused_before_running(tmp_path: Path) -> None:
    def step(*env: EnvVar) -> FetchStepContainer:
        return FetchStepContainer(image="localhost/never-run:1", env=env)

    now = Timestamp.of(2024, 7, 1)
    with pytest.raises(
        IngestError, match=r"^fetch.env.ODF_BATCH_SIZE must be a whole number, not 'lots'$"
    ):
        fetch(step(EnvVar(name="ODF_BATCH_SIZE", value="lots")), None, tmp_path, now)
    with pytest.raises(
        IngestError, match=r"^fetch.env.ODFD_TEST_UNSET_VAR: has no value and odfd's"
    ):
        fetch(step(EnvVar(name="ODFD_TEST_UNSET_VAR")), None, tmp_path, now)
    with pytest.raises(IngestError, match=r"^fetch.env.TOKEN: a value cannot span several lines$"):
        fetch(step(EnvVar(name="TOKEN", value="a\nb")), None, tmp_path, now)


def test_a_container_that_hangs_is_removed_after_the_time_limit(
    container_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(container, "RUN_TIMEOUT_SECONDS", 3.0)
    step = FetchStepContainer(
        image=container_image, command=("/bin/busybox",), args=("sleep", "600")
    )
    with pytest.raises(FetchError, match=r"ran longer than 3 s and was stopped$"):
        fetch(step, None, tmp_path, Timestamp.of(2024, 7, 1))
    running = subprocess.run(
        ["podman", "ps", "--all", "--quiet", "--filter", "name=odfd-fetch-"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert running.stdout.strip() == ""  # removed, not left sleeping
