"""A multi-tenant pipeline in the reference's style, end to end through the CLI, in DataFusion.

Accounts ``alice`` (three roots fed from NdJson, one with a DataFusion preprocess step, and a
UNION ALL of two of them), ``bob`` (a join with a window, then an aggregation, reading alice's
datasets) and ``carol`` (several query steps over bob's): derivatives four levels deep, inputs
referenced as quoted ``"account/name"``. Every derivative verifies after each run, a forged
slice is caught, bad queries fail with one line and commit nothing, and ``odfd sql`` runs in
DataFusion without loading PySpark. Ingest reads files with Spark (session ``spark`` fixture).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from odfd.cli.main import main
from protocol.hashing import logical_hash_parquet, physical_hash_file
from protocol.model import ExecuteTransform
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_SPARK_CONFIG
from tests.fixtures.workspace import object_path
from tests.verifier.builders import data_blocks, rewrite_chain

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[2]


def _root_manifest(name: str, fields: dict[str, str], preprocess: str | None = None) -> str:
    schema = "".join(
        f"\n            - name: {n}\n              type: {t}" for n, t in fields.items()
    )
    text = f"""\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Root
  metadata:
    - kind: AddPushSource
      sourceName: default
      read:
        kind: NdJson
        schema:
          fields:{schema}
      merge:
        kind: Append
"""
    if preprocess:
        text += f"""\
      preprocess:
        kind: Sql
        engine: datafusion
        query: {json.dumps(preprocess)}
"""
    return text


def _derivative_manifest(
    name: str, inputs: list[str], queries: list[tuple[str | None, str]]
) -> str:
    refs = "".join(f"\n        - datasetRef: {ref}" for ref in inputs)
    steps = ""
    for alias, query in queries:
        steps += "\n          - " + (f"alias: {alias}\n            " if alias else "")
        steps += f"query: {json.dumps(query)}"
    return f"""\
kind: DatasetSnapshot
version: 1
content:
  name: {name}
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:{refs}
      transform:
        kind: Sql
        engine: DataFusion
        queries:{steps}
"""


READING = {"event_time": "timestamp", "sensor": "string", "temp": "float64"}

MANIFESTS = {
    "alice": {
        "sensors.north": _root_manifest("sensors.north", READING),
        "sensors.south": _root_manifest(
            "sensors.south",
            {"event_time": "timestamp", "sensor": "string", "temp_f": "float64"},
            preprocess="SELECT event_time, sensor, round((temp_f - 32) * 5 / 9, 1) AS temp "
            "FROM input",
        ),
        "sensor-sites": _root_manifest(
            "sensor-sites", {"event_time": "timestamp", "sensor": "string", "region": "string"}
        ),
        "readings": _derivative_manifest(
            "readings",
            ["alice/sensors.north", "alice/sensors.south"],
            [
                (
                    None,
                    'SELECT event_time, sensor, temp FROM "alice/sensors.north" UNION ALL '
                    'SELECT event_time, sensor, temp FROM "alice/sensors.south"',
                )
            ],
        ),
    },
    "bob": {
        "readings.sited": _derivative_manifest(
            "readings.sited",
            ["alice/readings", "alice/sensor-sites"],
            [
                (
                    "joined",
                    'SELECT r.event_time, r.sensor, s.region, r.temp FROM "alice/readings" r '
                    'JOIN "alice/sensor-sites" s ON r.sensor = s.sensor',
                ),
                (
                    None,
                    "SELECT event_time, sensor, region, temp, row_number() OVER "
                    "(PARTITION BY sensor ORDER BY event_time) AS nth FROM joined",
                ),
            ],
        ),
        "region.stats": _derivative_manifest(
            "region.stats",
            ["bob/readings.sited"],
            [
                (
                    None,
                    "SELECT max(event_time) AS event_time, region, count(*) AS readings, "
                    'round(avg(temp), 2) AS avg_temp FROM "bob/readings.sited" '
                    "GROUP BY region ORDER BY region",
                )
            ],
        ),
    },
    "carol": {
        "hot.regions": _derivative_manifest(
            "hot.regions",
            ["bob/region.stats"],
            [
                ("hot", 'SELECT * FROM "bob/region.stats" WHERE avg_temp >= 20'),
                (None, "SELECT event_time, region, avg_temp, 'hot' AS label FROM hot"),
            ],
        ),
    },
}

DERIVATIVES = ["alice/readings", "bob/readings.sited", "bob/region.stats", "carol/hot.regions"]


def _ndjson(path: Path, rows: list[dict[str, object]]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _sql(capsys: pytest.CaptureFixture[str], query: str) -> list[dict]:
    code, out, err = _run(capsys, "sql", query, "--output", "ndjson")
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


@pytest.fixture
def root(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    workspace = tmp_path / "ws"
    assert main(["init", "--root", str(workspace)]) == 0
    with open(workspace / "config.toml", "a") as config:
        config.write(TEST_SPARK_CONFIG)
    monkeypatch.setenv("ODFD_HOME", str(workspace))
    monkeypatch.chdir(tmp_path)
    for account, manifests in MANIFESTS.items():
        folder = tmp_path / "manifests" / account
        folder.mkdir(parents=True)
        for name, text in manifests.items():
            (folder / f"{name}.yaml").write_text(text)
        assert main(["add", "--account", account, str(folder)]) == 0
    return workspace


def _verify_all(capsys: pytest.CaptureFixture[str]) -> dict:
    code, out, err = _run(
        capsys, "verify", "--recursive", "carol/hot.regions", "--output", "json", "--jobs", "1"
    )
    report = json.loads(out)
    assert code == 0, json.dumps(report["datasets"], indent=1)[:3000]
    return {d["alias"]: d for d in report["datasets"]}


def test_multi_tenant_pipeline_runs_incrementally_and_verifies(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = "2024-06-01T10:0{}:00Z".format
    ingests: list[tuple[str, list[dict[str, object]]]] = [
        (
            "alice/sensors.north",
            [
                {"event_time": t(0), "sensor": "n1", "temp": 21.5},
                {"event_time": t(1), "sensor": "n2", "temp": 12.0},
                {"event_time": t(2), "sensor": "n1", "temp": 22.5},
            ],
        ),
        (
            "alice/sensors.south",
            [
                {"event_time": t(0), "sensor": "s1", "temp_f": 86.0},
                {"event_time": t(3), "sensor": "s1", "temp_f": 95.0},
            ],
        ),
        (
            "alice/sensor-sites",
            [
                {"event_time": t(0), "sensor": "n1", "region": "north"},
                {"event_time": t(0), "sensor": "n2", "region": "north"},
                {"event_time": t(0), "sensor": "s1", "region": "south"},
            ],
        ),
    ]
    for n, (dataset, rows) in enumerate(ingests):
        code, _, err = _run(capsys, "ingest", dataset, _ndjson(tmp_path / f"a{n}.ndjson", rows))
        assert code == 0, err

    code, _, err = _run(capsys, "pull", "--recursive", "carol/hot.regions")
    assert code == 0, err
    for alias in DERIVATIVES:
        assert f"Updated: {alias}" in err
    # the preprocess converted Fahrenheit in DataFusion; UNION ALL keeps north's rows first
    assert _sql(capsys, 'SELECT "offset", sensor, temp FROM "alice/readings"') == [
        {"offset": 0, "sensor": "n1", "temp": 21.5},
        {"offset": 1, "sensor": "n2", "temp": 12.0},
        {"offset": 2, "sensor": "n1", "temp": 22.5},
        {"offset": 3, "sensor": "s1", "temp": 30.0},
        {"offset": 4, "sensor": "s1", "temp": 35.0},
    ]
    sited = _sql(capsys, 'SELECT sensor, region, nth FROM "bob/readings.sited" ORDER BY "offset"')
    assert sorted((r["sensor"], r["nth"]) for r in sited) == [
        ("n1", 1),
        ("n1", 2),
        ("n2", 1),
        ("s1", 1),
        ("s1", 2),
    ]
    assert _sql(capsys, 'SELECT region, readings, avg_temp FROM "bob/region.stats"') == [
        {"region": "north", "readings": 3, "avg_temp": 18.67},
        {"region": "south", "readings": 2, "avg_temp": 32.5},
    ]
    hot = _sql(capsys, 'SELECT region, label, event_time FROM "carol/hot.regions"')
    assert hot == [{"region": "south", "label": "hot", "event_time": t(3)}]

    reports = _verify_all(capsys)
    for alias in DERIVATIVES:
        repro = reports[alias]["layers"]["reproducibility"]
        assert repro["status"] == "ok" and repro["checked"]["transactions"] == 1, alias

    # a second transaction sees only the new slices
    more: list[tuple[str, list[dict[str, object]]]] = [
        ("alice/sensors.north", [{"event_time": t(5), "sensor": "n3", "temp": 25.0}]),
        ("alice/sensor-sites", [{"event_time": t(5), "sensor": "n3", "region": "east"}]),
    ]
    for n, (dataset, rows) in enumerate(more):
        assert _run(capsys, "ingest", dataset, _ndjson(tmp_path / f"b{n}.ndjson", rows))[0] == 0
    code, _, err = _run(capsys, "pull", "--recursive", "carol/hot.regions")
    assert code == 0, err
    assert "Updated: alice/readings: 1 new record(s)" in err
    assert _sql(capsys, 'SELECT region, readings FROM "bob/region.stats" WHERE "offset" >= 2') == [
        {"region": "east", "readings": 1}
    ]
    assert _sql(capsys, 'SELECT "offset", region FROM "carol/hot.regions"') == [
        {"offset": 0, "region": "south"},
        {"offset": 1, "region": "east"},
    ]
    reports = _verify_all(capsys)
    for alias in DERIVATIVES:
        assert reports[alias]["layers"]["reproducibility"]["checked"]["transactions"] == 2, alias

    # Spark cannot run DataFusion's dialect here: reported for information, not as a failure
    code, out, _ = _run(capsys, "verify", "bob/region.stats", "--cross-engine", "spark", "-j", "1")
    assert code == 0 and "cross-engine spark   0 agree, 0 differ, 2 error" in out

    # a forged slice, consistent in every hash, is caught by re-execution in DataFusion
    forged_rows = asyncio.run(_forge(root, "bob/region.stats"))
    code, out, _ = _run(capsys, "verify", "bob/region.stats", "-j", "1")
    assert code == 1
    assert "[logical-hash] re-executing the transaction gives different records" in out
    assert f'"avg_temp": {forged_rows}' in out


async def _forge(root: Path, alias: str) -> float:
    async with await Workspace.open(root) as workspace:
        dataset = await workspace.get_dataset(alias)
        transactions = [
            (h, b) for h, b in await data_blocks(dataset) if isinstance(b.event, ExecuteTransform)
        ]
        _, block = transactions[0]
        assert isinstance(block.event, ExecuteTransform) and block.event.new_data is not None
        recorded = pq.read_table(object_path(dataset.data, block.event.new_data.physical_hash))
        index = recorded.schema.get_field_index("avg_temp")
        values = recorded.column(index).to_pylist()
        forged = recorded.set_column(
            index, recorded.schema.field(index), pa.array([values[0] + 100, *values[1:]])
        )
        staging = root / "forged.parquet"
        pq.write_table(forged, staging)
        forged_slice = dataclasses.replace(
            block.event.new_data,
            logical_hash=logical_hash_parquet(staging),
            physical_hash=physical_hash_file(staging),
            size=staging.stat().st_size,
        )
        await dataset.data.put_file(staging, expected=forged_slice.physical_hash)
        event = dataclasses.replace(block.event, new_data=forged_slice)
        await rewrite_chain(
            dataset, {block.sequence_number: dataclasses.replace(block, event=event)}
        )
        return values[0] + 100


BAD_QUERIES = [
    ("syntax", 'SELEC event_time FROM "alice/sensors.north"', "query is invalid: SQL error"),
    ("unknown-table", "SELECT event_time FROM nowhere", "query is invalid: .*nowhere.* not found"),
    ("outputs-offset", 'SELECT * FROM "alice/sensors.north"', "a column 'offset' that clashes"),
    ("no-event-time", 'SELECT sensor FROM "alice/sensors.north"', "no event time column"),
]


def test_bad_queries_and_foreign_engines_fail_with_one_line_and_commit_nothing(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"event_time": "2024-06-01T10:00:00Z", "sensor": "n1", "temp": 21.5}]
    assert (
        _run(capsys, "ingest", "alice/sensors.north", _ndjson(tmp_path / "n.ndjson", rows))[0] == 0
    )
    folder = tmp_path / "bad"
    folder.mkdir()
    for name, query, _ in BAD_QUERIES:
        text = _derivative_manifest(name, ["alice/sensors.north"], [(None, query)])
        (folder / f"{name}.yaml").write_text(text)
    flink = _derivative_manifest("flinky", ["alice/sensors.north"], [(None, "SELECT 1")])
    (folder / "flinky.yaml").write_text(flink.replace("engine: DataFusion", "engine: flink"))
    assert main(["add", "--account", "dave", str(folder)]) == 0

    expected = [(f"dave/{name}", message) for name, _, message in BAD_QUERIES]
    expected.append(("dave/flinky", "uses engine 'flink', which odfd cannot run"))
    for alias, message in expected:
        head_before = asyncio.run(_head(root, alias))
        code, _, err = _run(capsys, "pull", alias)
        assert code != 0
        [line] = [line for line in err.splitlines() if alias in line]
        assert re.search(message, line), line
        assert asyncio.run(_head(root, alias)) == head_before  # nothing committed
    # the foreign dataset still passes integrity verification
    code, out, _ = _run(capsys, "verify", "dave/flinky", "-j", "1")
    assert code == 0 and "metadata integrity   ok" in out


async def _head(root: Path, alias: str) -> object:
    async with await Workspace.open(root) as workspace:
        return await (await workspace.get_dataset(alias)).chain.head()


def test_sql_in_datafusion_loads_no_pyspark(tmp_path: Path) -> None:
    """``odfd sql`` with the default engine, in a fresh process: no JVM, not even PySpark."""
    workspace = tmp_path / "ws"
    script = textwrap.dedent(
        f"""
        import sys
        from odfd.cli.main import main
        assert main(["init", "--root", {str(workspace)!r}]) == 0
        code = main(["sql", "SELECT 1 AS one", "--output", "ndjson", "--root", {str(workspace)!r}])
        loaded = sorted(m for m in sys.modules if m.startswith(("pyspark", "py4j")))
        print("exit", code, "loaded", loaded)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ['{"one": 1}', "exit 0 loaded []"]
