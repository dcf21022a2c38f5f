"""Layer 3 on datasets made by the real pipeline: honest ones reproduce, forged ones do not."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfd.cli.main import main
from protocol.hashing import logical_hash_parquet, physical_hash_file
from protocol.model import ExecuteTransform
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_ENGINES, TEST_SPARK_CONFIG
from tests.fixtures.workspace import object_path
from tests.verifier.builders import (
    data_blocks,
    derivative_with_engine,
    flip_byte,
    rewrite_chain,
    root_with_slices,
)
from tests.verifier.conftest import DERIVATIVES, EXECUTE_TRANSFORMS
from verifier.audit import VerifyOptions, verify
from verifier.report import Role, Status

pytestmark = pytest.mark.spark


async def test_a_replica_made_by_copying_folders_verifies_in_all_three_layers(
    pipeline_template: Path, tmp_path: Path
) -> None:
    async with await Workspace.init(tmp_path / "replica") as replica:
        for folder in (pipeline_template / "datasets").iterdir():
            shutil.copytree(folder, replica.layout.datasets_dir / folder.name)
        assert not (await replica.repair()).skipped
        report = await verify(
            replica, list(DERIVATIVES), VerifyOptions(recursive=True, jobs=2), engines=TEST_ENGINES
        )

        assert report.exit_code == 0, report.dumps()
        order = [d.alias for d in report.datasets]
        assert sorted(order) == sorted(["cities", "orders", "ticks", *DERIVATIVES])
        assert (
            order.index("cities") < order.index("cities.thousands") < order.index("orders.located")
        )
        assert order.index("orders") < order.index("orders.located") and order.index(
            "ticks"
        ) < order.index("ticks.scaled")
        for entry in report.datasets:
            assert [layer.status for layer in entry.layers[:2]] == [Status.OK, Status.OK]
            if entry.alias in DERIVATIVES:
                assert entry.role is Role.TARGET
                assert entry.reproducibility.status is Status.OK
                assert (
                    entry.reproducibility.checked["transactions"] == EXECUTE_TRANSFORMS[entry.alias]
                )
                assert entry.reproducibility.checked["records"] == entry.data.checked["records"]
            else:
                assert (
                    entry.role is Role.UPSTREAM and entry.reproducibility.status is Status.SKIPPED
                )

        # The honest data really holds retractions and corrections, and they reproduce.
        thousands = await replica.get_dataset("cities.thousands")
        ops = set()
        for _, block in await data_blocks(thousands):
            ops |= set(
                pq.read_table(object_path(thousands.data, block.event.new_data.physical_hash))
                .column("op")
                .to_pylist()
            )
        assert ops == {0, 1, 2, 3}


async def test_a_rewritten_chain_with_altered_derivative_data_is_caught_only_by_re_execution(
    pipeline_workspace: Workspace,
) -> None:
    workspace = pipeline_workspace
    dataset = await workspace.get_dataset("cities.thousands")
    transactions = [
        (h, b) for h, b in await data_blocks(dataset) if isinstance(b.event, ExecuteTransform)
    ]
    _, block = transactions[1]
    assert isinstance(block.event, ExecuteTransform) and block.event.new_data is not None
    recorded = pq.read_table(object_path(dataset.data, block.event.new_data.physical_hash))
    population = recorded.column("population").to_pylist()
    forged_population = [population[0] + 1, *population[1:]]
    forged_table = recorded.set_column(
        recorded.schema.get_field_index("population"),
        recorded.schema.field("population"),
        pa.array(forged_population, recorded.schema.field("population").type),
    )
    # The attacker recomputes every hash: the file's, the records', and every later block's.
    staging = workspace.root / "forged.parquet"
    pq.write_table(forged_table, staging)
    forged_slice = dataclasses.replace(
        block.event.new_data,
        logical_hash=logical_hash_parquet(staging),
        physical_hash=physical_hash_file(staging),
        size=staging.stat().st_size,
    )
    await dataset.data.put_file(staging, expected=forged_slice.physical_hash)
    forged = dataclasses.replace(
        block, event=dataclasses.replace(block.event, new_data=forged_slice)
    )
    new_hashes = await rewrite_chain(dataset, {block.sequence_number: forged})

    report = await verify(
        workspace, ["cities.thousands"], VerifyOptions(jobs=2, sample_rows=3), engines=TEST_ENGINES
    )
    entry = report.datasets[-1]
    assert entry.alias == "cities.thousands"
    assert (
        entry.metadata.status is Status.OK and entry.data.status is Status.OK
    )  # the forgery is consistent
    assert entry.reproducibility.status is Status.FAILED
    assert entry.reproducibility.checked["transactions"] == 3
    [finding] = entry.reproducibility.findings
    assert finding.rule == "logical-hash" and finding.field == "event.newData.logicalHash"
    assert (finding.block.sequence_number, finding.block.hash) == (
        block.sequence_number,
        new_hashes[block.sequence_number],
    )
    assert finding.expected == str(forged_slice.logical_hash)
    assert finding.actual == str(
        block.event.new_data.logical_hash
    )  # re-execution gives the original records
    interval = block.event.new_data.offset_interval
    assert finding.details is not None
    assert finding.details["offsetInterval"] == {"start": interval.start, "end": interval.end}
    sample = finding.details["sample"]
    [forged_row] = sample["recordedOnly"]
    [true_row] = sample["recomputedOnly"]
    assert (forged_row["offset"], forged_row["population"]) == (interval.start, population[0] + 1)
    assert (true_row["offset"], true_row["population"]) == (interval.start, population[0])
    assert forged_row["city"] == true_row["city"]
    # The input the transform read was checked first and is reported as such.
    [source] = [d for d in report.datasets if d.alias == "cities"]
    assert source.role is Role.INPUT and source.status is Status.OK
    assert report.exit_code == 1


async def test_a_tampered_input_makes_re_execution_impossible_not_a_pass(
    pipeline_workspace: Workspace,
) -> None:
    cities = await pipeline_workspace.get_dataset("cities")
    _, block = (await data_blocks(cities))[0]
    flip_byte(object_path(cities.data, block.event.new_data.physical_hash), 40)
    report = await verify(
        pipeline_workspace, ["cities.thousands"], VerifyOptions(jobs=2), engines=TEST_ENGINES
    )
    source, target = report.datasets
    assert (source.alias, source.role, source.data.status) == ("cities", Role.INPUT, Status.FAILED)
    assert target.reproducibility.status is Status.CANNOT_VERIFY
    assert (
        target.reproducibility.reason
        == "inputs must verify first: input cities did not pass integrity checks (failed)"
    )
    assert report.exit_code == 1


async def test_an_input_missing_from_the_workspace_cannot_be_verified(
    pipeline_template: Path, tmp_path: Path
) -> None:
    async with await Workspace.open(pipeline_template) as template:
        keep = {(await template.resolve(alias)).id for alias in ("orders", "orders.located")}
        cities_id = (await template.resolve("cities")).id
    async with await Workspace.init(tmp_path / "partial") as partial:
        for dataset_id in keep:
            folder = template.layout.dataset(dataset_id).root
            shutil.copytree(folder, partial.layout.datasets_dir / folder.name)
        await partial.repair()
        report = await verify(
            partial, ["orders.located"], VerifyOptions(jobs=2, recursive=True), engines=TEST_ENGINES
        )
        target = report.datasets[-1]
        assert [target.metadata.status, target.data.status] == [Status.OK, Status.OK]
        assert target.reproducibility.status is Status.CANNOT_VERIFY
        assert target.reproducibility.reason is not None
        assert f"input {cities_id} is not in this workspace" in target.reproducibility.reason
        assert report.exit_code == 2


def test_cli_re_executes_one_block_and_prints_the_json_report(
    pipeline_template: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "ws"
    shutil.copytree(pipeline_template, root)
    assert TEST_SPARK_CONFIG in (root / "config.toml").read_text()
    code = main(
        [
            "verify",
            "ticks.scaled",
            "--from",
            "6",
            "--to",
            "6",
            "--output",
            "json",
            "--root",
            str(root),
        ]
    )
    out, err = capsys.readouterr()
    assert err == ""  # not a terminal: no progress
    report = json.loads(out)
    assert code == 0 and report["exitCode"] == 0 and report["status"] == "ok"
    target = report["datasets"][-1]
    assert target["alias"] == "ticks.scaled"
    assert target["range"]["from"]["sequenceNumber"] == 6 == target["range"]["to"]["sequenceNumber"]
    assert target["layers"]["reproducibility"]["checked"]["transactions"] == 1
    assert target["layers"]["data"]["checked"]["slices"] == 1


@pytest.mark.parametrize(
    ("query", "rule"),
    [
        ("SELECT event_time, value, rand() AS noise FROM src", "non-deterministic-query"),
        ("SELECT event_time, no_such_function(value) AS v FROM src", "query-rejected"),
    ],
)
async def test_transactions_this_spark_cannot_reproduce_are_not_verified(
    spark: object, tmp_path: Path, query: str, rule: str
) -> None:
    async with await Workspace.init(tmp_path / "ws") as workspace:
        source = await root_with_slices(workspace, "source", [[1, 2]])
        await derivative_with_engine(workspace, "derived", source, "spark", query=query)
        report = await verify(workspace, ["derived"], VerifyOptions(jobs=1), engines=TEST_ENGINES)
        derived = report.datasets[-1]
        assert derived.reproducibility.status is Status.CANNOT_VERIFY
        [finding] = derived.reproducibility.findings
        assert (finding.rule, finding.status, finding.block.sequence_number) == (
            rule,
            Status.CANNOT_VERIFY,
            3,
        )
        assert report.exit_code == 2
