"""Orchestration and the command line, on datasets built without Spark: what gets audited in
which role and order, the JSON contract, exit codes and progress."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from odfd.cli.main import main
from protocol.errors import ParseError
from protocol.identity import Multibase, Multihash
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_ENGINES, TEST_SPARK_CONFIG
from tests.fixtures.workspace import object_path
from tests.verifier.builders import (
    data_blocks,
    derivative_with_engine,
    flip_byte,
    root_with_slices,
)
from verifier.audit import VerifyOptions, verify
from verifier.progress import NoProgress, TerminalProgress, progress_for
from verifier.report import REPORT_VERSION, Layer, Role, Status
from verifier.selection import parse_block_selector


async def test_a_transform_in_an_engine_odfd_lacks_is_not_re_executable_its_input_is_checked(
    workspace: Workspace,
) -> None:
    source = await root_with_slices(workspace, "source", [[1, 2], [3]])
    await derivative_with_engine(workspace, "derived", source, "flink")
    report = await verify(workspace, ["derived"], VerifyOptions(jobs=1), engines=TEST_ENGINES)
    assert [(d.alias, d.role) for d in report.datasets] == [
        ("source", Role.INPUT),
        ("derived", Role.TARGET),
    ]
    source_entry, derived = report.datasets
    assert (
        source_entry.status is Status.OK and source_entry.reproducibility.status is Status.SKIPPED
    )
    assert [derived.metadata.status, derived.data.status] == [Status.OK, Status.OK]
    assert derived.reproducibility.status is Status.NOT_REEXECUTABLE
    assert derived.status is Status.NOT_REEXECUTABLE  # neither ok nor a failure
    [finding] = derived.reproducibility.findings
    assert finding.rule == "engine-not-available" and finding.status is Status.NOT_REEXECUTABLE
    assert finding.block.sequence_number == 3
    assert finding.message == "not re-executable here: engine flink"
    assert derived.reproducibility.cross_engine is None
    assert report.exit_code == 3


async def test_cross_engine_re_executes_a_foreign_transform_for_information(
    workspace: Workspace,
) -> None:
    source = await root_with_slices(workspace, "source", [[1, 2], [3]])
    # the builder records values 0, 1, 2 with event times 0, 1, 2 s (the source holds 1, 2, 3)
    shifted = "SELECT event_time - INTERVAL '1 second' AS event_time, value - 1 AS value FROM src"
    await derivative_with_engine(workspace, "same", source, "flink", query=shifted)
    await derivative_with_engine(workspace, "other", source, "FLINK")
    options = VerifyOptions(jobs=1, cross_engine="datafusion")
    same = (await verify(workspace, ["same"], options, engines=TEST_ENGINES)).datasets[-1]
    assert same.reproducibility.status is Status.NOT_REEXECUTABLE
    cross = same.reproducibility.cross_engine
    assert cross is not None and cross.engine == "datafusion"
    [check] = cross.checks
    assert (check.result, check.block.sequence_number) == ("agree", 3)
    assert check.message == "datafusion gives the recorded 3 record(s)"

    reordered = shifted + " ORDER BY value DESC"
    await derivative_with_engine(workspace, "reordered", source, "flink", query=reordered)
    [check] = (
        (await verify(workspace, ["reordered"], options, engines=TEST_ENGINES))
        .datasets[-1]
        .reproducibility.cross_engine
    ).checks
    assert (check.result, check.message) == (
        "agree",
        "datafusion gives the recorded 3 record(s), in another order",
    )

    report = await verify(workspace, ["other"], options, engines=TEST_ENGINES)
    other = report.datasets[-1]
    assert other.reproducibility.status is Status.NOT_REEXECUTABLE  # a difference is no failure
    assert report.exit_code == 3
    [check] = other.reproducibility.cross_engine.checks
    assert check.result == "differ" and "different records" in check.message, check.sample
    assert check.sample is not None
    # compared without offsets: records 1 and 2 are in both, only the ends differ
    assert [r["value"] for r in check.sample["recordedOnly"]] == [0]
    assert [r["value"] for r in check.sample["recomputedOnly"]] == [3]
    assert "offset" not in check.sample["recordedOnly"][0]
    as_json = report.to_json()["datasets"][-1]["layers"]["reproducibility"]["crossEngine"]
    assert (as_json["engine"], as_json["agree"], as_json["differ"], as_json["error"]) == (
        "datafusion",
        0,
        1,
        0,
    )


async def test_recursive_audits_upstream_in_every_layer_once(workspace: Workspace) -> None:
    source = await root_with_slices(workspace, "source", [[1]])
    await derivative_with_engine(workspace, "first", source, "flink")
    await derivative_with_engine(workspace, "second", source, "flink")
    report = await verify(
        workspace,
        ["first", "second", "first"],
        VerifyOptions(jobs=1, recursive=True),
        engines=TEST_ENGINES,
    )
    assert [(d.alias, d.role) for d in report.datasets] == [
        ("source", Role.UPSTREAM),
        ("first", Role.TARGET),
        ("second", Role.TARGET),
    ]


@pytest.mark.parametrize("recursive", [False, True])
async def test_an_input_named_later_as_a_target_is_reported_once_as_a_target(
    workspace: Workspace, recursive: bool
) -> None:
    source = await root_with_slices(workspace, "source", [[1]])
    await derivative_with_engine(workspace, "derived", source, "flink")
    report = await verify(
        workspace,
        ["derived", "source"],
        VerifyOptions(jobs=1, recursive=recursive),
        engines=TEST_ENGINES,
    )
    assert [(d.alias, d.role) for d in report.datasets] == [
        ("source", Role.TARGET),
        ("derived", Role.TARGET),
    ]
    assert report.datasets[0].reproducibility.status is Status.SKIPPED
    assert report.datasets[0].reproducibility.reason is not None
    assert "root dataset" in report.datasets[0].reproducibility.reason


async def test_integrity_only_skips_re_execution(workspace: Workspace) -> None:
    source = await root_with_slices(workspace, "source", [[1]])
    await derivative_with_engine(workspace, "derived", source, "flink")
    report = await verify(
        workspace, ["derived"], VerifyOptions(jobs=1, integrity_only=True), engines=TEST_ENGINES
    )
    [derived] = report.datasets  # inputs are only needed before re-executing
    assert (
        derived.reproducibility.status is Status.SKIPPED
        and derived.reproducibility.reason == "--integrity-only"
    )
    assert report.exit_code == 0


async def test_the_json_report_has_the_documented_shape(workspace: Workspace) -> None:
    dataset = await root_with_slices(workspace, "source", [[1, 2], [3]], checkpoints=True)
    hash, block = (await data_blocks(dataset))[1]
    flip_byte(object_path(dataset.data, block.event.new_data.physical_hash), 20)
    report = json.loads(
        (await verify(workspace, ["source"], VerifyOptions(jobs=2), engines=TEST_ENGINES)).dumps()
    )
    assert set(report) == {
        "kind",
        "version",
        "startedAt",
        "finishedAt",
        "options",
        "status",
        "exitCode",
        "layerCounts",
        "datasets",
    }
    assert (report["kind"], report["version"], report["status"], report["exitCode"]) == (
        "odfd.VerifyReport",
        REPORT_VERSION,
        "failed",
        1,
    )
    assert report["options"] == {
        "recursive": False,
        "integrityOnly": False,
        "from": None,
        "to": None,
        "jobs": 2,
        "sampleRows": 5,
        "crossEngine": None,
        "auditState": "off",
    }
    assert report["layerCounts"] == {
        "ok": 1,
        "failed": 1,
        "cannot-verify": 0,
        "not-re-executable": 0,
        "skipped": 1,
    }
    [entry] = report["datasets"]
    assert set(entry) == {"id", "alias", "kind", "role", "status", "head", "range", "layers"}
    assert (entry["kind"], entry["role"], entry["status"]) == ("root", "target", "failed")
    assert list(entry["layers"]) == [str(layer) for layer in Layer]
    data = entry["layers"]["data"]
    assert set(data) == {
        "status",
        "reason",
        "checked",
        "findings",
        "findingsOmitted",
        "durationSeconds",
        "crossEngine",
    }
    assert data["crossEngine"] is None
    assert data["checked"]["slices"] == 2 and data["checked"]["checkpoints"] == 2
    finding = next(f for f in data["findings"] if f["rule"] == "physical-hash")
    assert set(finding) == {
        "status",
        "rule",
        "message",
        "block",
        "file",
        "field",
        "expected",
        "actual",
        "details",
    }
    assert finding["block"] == {"sequenceNumber": block.sequence_number, "hash": str(hash)}
    assert finding["file"] == f"data/{block.event.new_data.physical_hash}"
    assert finding["field"] == "event.newData.physicalHash" and finding["details"] is None


def cli_workspace(tmp_path: Path, build) -> Path:
    """A workspace set up by ``build(workspace)`` for in-process CLI runs (which start their own loop)."""
    root = tmp_path / "cli-ws"

    async def setup() -> None:
        async with await Workspace.init(root) as workspace:
            workspace.layout.config_path.write_text(
                workspace.layout.config_path.read_text() + TEST_SPARK_CONFIG
            )
            await build(workspace)

    asyncio.run(setup())
    return root


def test_cli_exit_codes_and_text_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flipped: dict[str, str] = {}

    async def build(workspace: Workspace) -> None:
        healthy = await root_with_slices(workspace, "healthy", [[1, 2]])
        broken = await root_with_slices(workspace, "broken", [[1, 2], [3]])
        await derivative_with_engine(workspace, "foreign", healthy, "flink")
        hash, block = (await data_blocks(broken))[1]
        path = object_path(broken.data, block.event.new_data.physical_hash)
        flip_byte(path, 30)
        flipped.update(block=f"block #{block.sequence_number} {hash}", file=f"data/{path.name}")

    root = cli_workspace(tmp_path, build)
    assert main(["verify", "healthy", "--root", str(root)]) == 0
    assert main(["verify", "broken", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert f"x {flipped['block']}, {flipped['file']}: [physical-hash]" in out
    assert "data integrity       FAILED" in out and "Result: verification FAILED" in out
    assert main(["verify", "foreign", "--root", str(root)]) == 3
    out = capsys.readouterr().out
    assert "reproducibility      not re-executable here" in out
    assert "[engine-not-available] not re-executable here: engine flink" in out
    assert "Result: verified, except transforms whose engine this node lacks" in out
    assert main(["verify", "foreign", "--integrity-only", "--root", str(root)]) == 0
    assert main(["verify", "nothing.here", "--root", str(root)]) == 2
    captured = capsys.readouterr()
    assert "dataset nothing.here is not in the workspace" in captured.err
    assert main(["verify", "healthy", "--from", "9", "--root", str(root)]) == 2
    assert "--from 9 is not a block of healthy" in capsys.readouterr().err


def test_blocks_are_selected_by_sequence_number_or_hash() -> None:
    hash = Multihash.from_digest_sha3_256(b"block")
    assert parse_block_selector("12") == 12
    assert parse_block_selector(str(hash)) == hash
    assert parse_block_selector(hash.to_multibase(Multibase.BASE58_BTC)) == hash
    with pytest.raises(ParseError, match="neither a sequence number nor a block hash"):
        parse_block_selector("-1")


def test_progress_is_drawn_on_a_terminal_only() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert isinstance(progress_for(io.StringIO()), NoProgress)
    assert isinstance(progress_for(Terminal()), TerminalProgress)
    now = [100.0]
    stream = Terminal()
    progress = TerminalProgress(stream, clock=lambda: now[0])
    progress.begin("trades", Layer.DATA, blocks=10, bytes=4 * 1024 * 1024)
    now[0] += 2.0
    progress.advance(blocks=5, bytes=1024 * 1024)
    assert (
        progress.line()
        == "trades: data integrity · 5/10 blocks · 1.0 MiB/4.0 MiB · 512.0 KiB/s · ETA 6s"
    )
    assert stream.getvalue().endswith(progress.line())
    progress.end()
    assert stream.getvalue().endswith("\r")
    progress.begin("trades", Layer.METADATA)
    now[0] += 1.0
    progress.advance(blocks=30)
    assert progress.line() == "trades: metadata integrity · 30 blocks · 30.0 blocks/s"


async def test_the_daemon_audit_of_a_foreign_engine_says_not_re_executable(
    workspace: Workspace,
) -> None:
    from datetime import UTC, datetime

    from odfd.app.verify import summarize
    from storage.catalog.audit_records import AuditRecord
    from storage.catalog.audits import AuditTable

    source = await root_with_slices(workspace, "source", [[1]])
    derived = await derivative_with_engine(workspace, "derived", source, "RisingWave")
    assert derived.id is not None
    report = await verify(workspace, ["derived"], VerifyOptions(jobs=1), engines=TEST_ENGINES)
    summary = summarize(report, derived.id)
    assert summary.startswith("reproducibility not-re-executable: block #3 ")
    assert summary.endswith("[engine-not-available] not re-executable here: engine RisingWave")
    # the catalog stores the status as it is (migration 4 allows it), and it is not failing
    now = datetime.now(UTC)
    record = AuditRecord(
        derived.id, "derived", "full", "test", None, now, now, "not-re-executable", summary
    )
    table = AuditTable(workspace.catalog)
    await table.add(record, keep=5)
    stored = await table.latest(derived.id)
    assert stored is not None and stored.status == "not-re-executable" and not stored.failing


async def test_a_foreign_engine_dataset_replicates_to_a_peer_and_verifies_there(
    workspace: Workspace, tmp_path: Path
) -> None:
    from odfd.sync.pull import pull
    from odfd.sync.push import push

    source = await root_with_slices(workspace, "source", [[1, 2]])
    await derivative_with_engine(workspace, "derived", source, "flink")
    async with await Workspace.init(tmp_path / "peer") as peer:
        for alias in ("source", "derived"):
            await push(workspace, alias, f"file://{tmp_path / 'export' / alias}")
            await pull(peer, f"file://{tmp_path / 'export' / alias}", alias=alias)
        report = await verify(peer, ["derived"], VerifyOptions(jobs=1), engines=TEST_ENGINES)
        derived = report.datasets[-1]
        assert [derived.metadata.status, derived.data.status] == [Status.OK, Status.OK]
        assert derived.reproducibility.status is Status.NOT_REEXECUTABLE
        assert report.exit_code == 3
