"""Why- and where-provenance over pipelines of two and three levels, in DataFusion and Spark.

Each case selects one output row by value and states, computed by hand from the rows listed in
``provenance_pipelines``, the input rows that produce it (and, three levels down, the root rows).
Every answer must also pass the re-execution check; a wrong witness set must fail it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from odfd.coordinator.transform import update_derivative
from protocol.identity import DatasetId, DatasetRef
from protocol.model import Timestamp
from storage.dataset import Dataset
from storage.workspace import Workspace
from tests.fixtures.spark import TEST_ENGINES
from tests.verifier.provenance_pipelines import T, append_rows, build
from verifier.engine.contract import TransformRequest
from verifier.engine.replay import replay_request
from verifier.provenance.check import as_stored, reproduces
from verifier.provenance.dialects import TAG
from verifier.provenance.errors import ProvenanceError
from verifier.provenance.model import RowProvenance
from verifier.provenance.trace import TraceOptions, Tracer
from verifier.provenance.witness import run_tagged

#: A witness: (dataset, offset) for a root's row, (dataset, predicate) for a derivative's.
Witness = tuple[str, int | str]


@dataclass(frozen=True)
class Case:
    id: str
    dataset: str
    where: str
    """DataFusion predicate selecting exactly one row of ``dataset``."""
    witnesses: frozenset[Witness]
    leaves: frozenset[tuple[str, int]] | None = None
    """Root rows reached when traced to the end (for three-level cases)."""
    columns: dict[str, str] = field(default_factory=dict)
    """Expected where-provenance (a subset of the answer's)."""


def _w(*items: Witness) -> frozenset[Witness]:
    return frozenset(items)


CASES = [
    Case(
        "projection",
        "proj",
        "symbol = 'B' AND doubled = 38",
        _w(("trades", 3)),
        columns={"symbol": "trades.symbol", "event_time": "trades.event_time"},
    ),
    Case(
        "filter-rename",
        "filt",
        "ticker = 'A' AND price = 13",
        _w(("trades", 5)),
        columns={"ticker": "trades.symbol", "price": "trades.price"},
    ),
    Case(
        "inner-join",
        "inner",
        "symbol = 'B' AND value = 57",
        _w(("trades", 3), ("rates", 1)),
        columns={"symbol": "trades.symbol"},
    ),
    Case(
        "left-join-match",
        "left",
        "price = 11",
        _w(("trades", 2), ("rates", 0)),
        columns={"rate": "rates.rate", "price": "trades.price"},
    ),
    Case("left-join-no-match", "left", "symbol = 'C'", _w(("trades", 7))),
    Case("union-all-first", "unioned", "symbol = 'C'", _w(("trades", 7))),
    Case("union-all-second", "unioned", "symbol = 'B'", _w(("rates", 1))),
    Case(
        "group-by",
        "grouped",
        "symbol = 'B' AND total = 60 AND n = 3",
        _w(("trades", 1), ("trades", 3), ("trades", 6)),
        columns={"symbol": "trades.symbol"},
    ),
    Case(
        "distinct",
        "distinct",
        "symbol = 'A'",
        _w(("trades", 0), ("trades", 2), ("trades", 4), ("trades", 5)),
    ),
    Case(
        "window-running-sum",
        "windowed",
        "symbol = 'A' AND n = 3 AND running = 33",
        _w(("trades", 0), ("trades", 2), ("trades", 4)),
        columns={"price": "trades.price"},
    ),
    Case(
        "window-other-partition",
        "windowed",
        "symbol = 'B' AND n = 2",
        _w(("trades", 1), ("trades", 3)),
    ),
    Case(
        "window-in-a-subquery",
        "nested",
        "price = 19",
        _w(("trades", 1), ("trades", 3), ("trades", 6)),
        columns={"price": "trades.price"},
    ),
    Case(
        "several-steps",
        "steps",
        "symbol = 'B'",
        _w(("trades", 6), ("rates", 1)),
        columns={"symbol": "trades.symbol"},
    ),
    Case(
        "three-levels-filter-of-group-by",
        "top",
        "leader = 'A'",
        _w(("grouped", "symbol = 'A'")),
        leaves=frozenset({("trades", 0), ("trades", 2), ("trades", 4), ("trades", 5)}),
        columns={"leader": "grouped.symbol", "total": "grouped.total"},
    ),
    Case(
        "three-levels-join-of-derivatives",
        "joined.totals",
        "symbol = 'B'",
        _w(("inner", "symbol = 'B' AND value = 63"), ("grouped", "symbol = 'B'")),
        leaves=frozenset({("trades", 1), ("trades", 3), ("trades", 6), ("rates", 1)}),
        columns={"n": "grouped.n", "value": "inner.value"},
    ),
]

#: One transform covering a left join, a window, a filter, GROUP BY, DISTINCT, UNION ALL and
#: several steps, and a derivative of it with an inner join: Spark runs few transforms.
COMBO_CASES = [
    Case(
        "combo-window-over-left-join",
        "combo",
        "kind = 'row' AND value = 46",
        _w(("trades", 0), ("trades", 2), ("trades", 4), ("trades", 5), ("rates", 0)),
    ),
    Case(
        "combo-filter-window",
        "combo",
        "kind = 'row' AND value = 39",
        _w(("trades", 1), ("trades", 3), ("rates", 1)),
    ),
    Case(
        "combo-group-by-left-join-no-match",
        "combo",
        "kind = 'group' AND symbol = 'C'",
        _w(("trades", 7)),
    ),
    Case(
        "combo-group-by",
        "combo",
        "kind = 'group' AND symbol = 'B'",
        _w(("trades", 1), ("trades", 3), ("trades", 6), ("rates", 1)),
    ),
    Case(
        "combo-distinct",
        "combo",
        "kind = 'distinct' AND symbol = 'A'",
        _w(("trades", 0), ("trades", 2), ("trades", 4), ("trades", 5)),
    ),
    Case(
        "combo-three-levels-inner-join",
        "combo.top",
        "symbol = 'B'",
        _w(("combo", "kind = 'group' AND symbol = 'B'"), ("rates", 1)),
        leaves=frozenset({("trades", 1), ("trades", 3), ("trades", 6), ("rates", 1)}),
        columns={"symbol": "combo.symbol"},
    ),
]


async def _with_tracer(root: Path, act: Callable[[Workspace, Tracer], Awaitable[Any]]) -> Any:
    async with await Workspace.open(root) as workspace:

        async def open_dataset(dataset_id: DatasetId) -> tuple[Dataset, str]:
            record = await workspace.resolve(DatasetRef(dataset_id))
            return workspace.open_dataset(dataset_id), str(record.alias)

        return await act(workspace, Tracer(open_dataset, TEST_ENGINES, TraceOptions(depth=None)))


def _run(root: Path, act: Callable[[Workspace, Tracer], Awaitable[Any]]) -> Any:
    return asyncio.run(_with_tracer(root, act))


def _check_case(root: Path, case: Case) -> None:
    _check_cases(root, [case])


def _check_cases(root: Path, cases: list[Case]) -> None:
    """Answers the cases of each dataset in one pass (one tagged run per transaction)."""

    async def act(workspace: Workspace, tracer: Tracer) -> list[tuple[Case, RowProvenance, set]]:
        answers = []
        for dataset in dict.fromkeys(c.dataset for c in cases):
            mine = [c for c in cases if c.dataset == dataset]
            record = await workspace.resolve(dataset)
            offsets = []
            for case in mine:
                selected = await tracer.select_offsets(record.id, case.where)
                assert len(selected) == 1, f"{case.where} selects {selected}"
                offsets.extend(selected)
            rows = await tracer.explain(record.id, offsets)
            for case, row in zip(mine, rows, strict=True):
                answers.append((case, row, await _expected(workspace, tracer, case)))
        return answers

    for case, row, expected in _run(root, act):
        assert row.checked and row.traced, case.id
        assert {(w.dataset, w.offset) for w in row.inputs} == expected, case.id
        for name, origin in case.columns.items():
            assert row.columns.get(name) == origin, (case.id, row.columns)
        if case.leaves is not None:
            assert _leaves(row) == case.leaves, case.id
            assert all(w.checked for w in row.inputs if w.derived), case.id


async def _expected(workspace: Workspace, tracer: Tracer, case: Case) -> set[tuple[str, int]]:
    expected = set()
    for dataset, at in case.witnesses:
        if isinstance(at, int):
            expected.add((dataset, at))
        else:
            record = await workspace.resolve(dataset)
            for offset in await tracer.select_offsets(record.id, at):
                expected.add((dataset, offset))
    return expected


def _leaves(row: RowProvenance) -> set[tuple[str, int]]:
    if not row.derived:
        return {(row.dataset, row.offset)}
    return set().union(*(_leaves(w) for w in row.inputs))


@pytest.fixture(scope="module")
def datafusion_pipeline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("provenance-df") / "ws"
    asyncio.run(build(root, "datafusion"))
    return root


@pytest.fixture(scope="module")
def spark_pipeline(tmp_path_factory: pytest.TempPathFactory, spark: object) -> Path:
    root = tmp_path_factory.mktemp("provenance-spark") / "ws"
    asyncio.run(build(root, "spark", ["combo", "combo.top"]))
    return root


@pytest.mark.parametrize("case", CASES + COMBO_CASES, ids=[c.id for c in CASES + COMBO_CASES])
def test_witnesses_in_datafusion(datafusion_pipeline: Path, case: Case) -> None:
    _check_case(datafusion_pipeline, case)


def test_witnesses_in_spark(spark_pipeline: Path) -> None:
    """The combined transforms in Spark, the rows of one transaction answered in one pass (each
    row is still checked by its own Spark run, so the cases are the fewest covering every
    construct: a filtered window row over the left join is enough once)."""
    _check_cases(spark_pipeline, [c for c in COMBO_CASES if c.id != "combo-filter-window"])


def test_one_row_narrows_the_tagged_run_in_spark(spark_pipeline: Path) -> None:
    """One row's question in Spark: a GROUP BY over a left join lists its group's input rows
    (each once, in the slices' types) and Spark reproduces the row from them; a running sum is
    tagged over the row's partition only. The combo transaction's inputs, other queries: no
    extra Spark transforms are built."""

    async def act(workspace: Workspace, tracer: Tracer) -> None:
        record = await workspace.resolve("combo")
        dataset = workspace.open_dataset(record.id)
        block = (await dataset.chain.state()).last_data_block
        assert block is not None
        engine = TEST_ENGINES.named("spark")
        with tempfile.TemporaryDirectory() as tmp:
            request = await replay_request(dataset, block, tracer._open_input, Path(tmp) / "r")

            def asking(query: str) -> TransformRequest:
                return dataclasses.replace(
                    request,
                    transform=dataclasses.replace(request.transform, query=query, queries=None),
                )

            grouped = asking(
                "SELECT max(t.event_time) AS event_time, t.symbol, sum(t.price * r.rate) AS value "
                "FROM `trades` t LEFT JOIN `rates` r ON t.symbol = r.symbol GROUP BY t.symbol"
            )
            run = await asyncio.to_thread(run_tagged, grouped, engine, {"symbol": "B"})
            assert run.focused and run.group is not None
            offsets = {k: rows.column("offset").to_pylist() for k, rows in run.group.items()}
            assert offsets == {0: [1, 3, 6], 1: [1]}
            tables = {k: as_stored(grouped.inputs[k], rows) for k, rows in run.group.items()}
            assert all(t is not None for t in tables.values())
            row = {"event_time": _at(7), "symbol": "B", "value": (20.0 + 19.0 + 21.0) * 3.0}
            folder = _folder(tmp, "group")
            assert await asyncio.to_thread(reproduces, grouped, engine, tables, row, folder)

            windowed = asking(
                "SELECT event_time, symbol, price, sum(price) OVER (PARTITION BY symbol "
                "ORDER BY event_time) AS running FROM `trades`"
            )
            run = await asyncio.to_thread(run_tagged, windowed, engine, {"symbol": "A"})
            assert run.focused and set(run.table.column("symbol").to_pylist()) == {"A"}
            (tag,) = run.table.filter(pc.equal(run.table.column("running"), 33.0))[TAG]
            assert await asyncio.to_thread(run.witnesses, tag.as_py()) == {0: (0, 2, 4)}

    _run(spark_pipeline, act)


def _at(seconds: int) -> datetime:
    """The event time of ``trades``' rows (offset ``n`` is ``n + 1`` seconds after T)."""
    return datetime.fromtimestamp(T / 1000 + seconds, tz=UTC)


def test_root_rows_lead_to_their_ingest(datafusion_pipeline: Path) -> None:
    async def act(workspace: Workspace, tracer: Tracer) -> RowProvenance:
        record = await workspace.resolve("steps")
        (offset,) = await tracer.select_offsets(record.id, "symbol = 'B'")
        return (await tracer.explain(record.id, [offset]))[0]

    row = _run(datafusion_pipeline, act)
    trade = next(w for w in row.inputs if w.dataset == "trades")
    assert trade.values is not None and trade.values["price"] == 21.0
    assert trade.ingest is not None
    # offset 6 is in trades' second AddData block, ingested from its second upload
    assert trade.ingest.source == "push source 'upload'"
    assert trade.ingest.source_state == {
        "sourceName": "upload",
        "kind": "odf/etag",
        "value": "trades-1.ndjson",
    }
    assert trade.ingest.block_hash == trade.block_hash


def test_depth_one_stops_at_the_direct_inputs(datafusion_pipeline: Path) -> None:
    async def act(workspace: Workspace, _: Tracer) -> RowProvenance:
        async def open_dataset(dataset_id: DatasetId) -> tuple[Dataset, str]:
            record = await workspace.resolve(DatasetRef(dataset_id))
            return workspace.open_dataset(dataset_id), str(record.alias)

        tracer = Tracer(open_dataset, TEST_ENGINES, TraceOptions(depth=1))
        record = await workspace.resolve("top")
        return (await tracer.explain(record.id, [0]))[0]

    row = _run(datafusion_pipeline, act)
    (grouped,) = row.inputs
    assert grouped.dataset == "grouped" and grouped.derived
    assert not grouped.traced and grouped.inputs == []
    assert grouped.values is not None and grouped.values["symbol"] == "A"


def test_a_wrong_witness_set_fails_the_check(datafusion_pipeline: Path) -> None:
    """The oracle can fail: group B without one of its rows gives another total."""

    async def act(workspace: Workspace, tracer: Tracer) -> tuple[bool, bool]:
        record = await workspace.resolve("grouped")
        (offset,) = await tracer.select_offsets(record.id, "symbol = 'B'")
        (answer,) = await tracer.explain(record.id, [offset])
        assert answer.values is not None
        row = {k: v for k, v in answer.values.items() if k not in ("offset", "system_time")}
        dataset = workspace.open_dataset(record.id)
        block = (await dataset.chain.state()).last_data_block
        assert block is not None
        with tempfile.TemporaryDirectory() as tmp:
            request = await replay_request(dataset, block, tracer._open_input, Path(tmp) / "r")
            engine = TEST_ENGINES.named("datafusion")
            right = reproduces(request, engine, {0: (1, 3, 6)}, row, _folder(tmp, "a"))
            wrong = reproduces(request, engine, {0: (1, 3)}, row, _folder(tmp, "b"))
        return right, wrong

    assert _run(datafusion_pipeline, act) == (True, False)


def test_a_narrowed_run_that_finds_nothing_falls_back_to_the_whole_run(
    datafusion_pipeline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group listing with no rows (as when a key literal compares unequal in the engine) is
    not an answer: the whole transaction is tagged and the row answered from it."""
    from verifier.provenance import witness

    monkeypatch.setattr(witness, "_split_group", lambda *_: {})

    async def act(workspace: Workspace, tracer: Tracer) -> RowProvenance:
        record = await workspace.resolve("grouped")
        (offset,) = await tracer.select_offsets(record.id, "symbol = 'B'")
        return (await tracer.explain(record.id, [offset]))[0]

    row = _run(datafusion_pipeline, act)
    assert row.checked and [(w.dataset, w.offset) for w in row.inputs] == [
        ("trades", 1),
        ("trades", 3),
        ("trades", 6),
    ]


def _folder(tmp: str, name: str) -> Path:
    path = Path(tmp) / name
    path.mkdir()
    return path


@pytest.mark.parametrize(
    ("dataset", "offset", "message"),
    [
        ("proj", 99, "proj has no row at offset 99 (its rows run 0..7)"),
        ("trades", 0, "trades is a root dataset: its rows were ingested, not derived"),
    ],
)
def test_bad_input_is_one_line(
    datafusion_pipeline: Path, dataset: str, offset: int, message: str
) -> None:
    async def act(workspace: Workspace, tracer: Tracer) -> None:
        record = await workspace.resolve(dataset)
        await tracer.explain(record.id, [offset])

    with pytest.raises(ProvenanceError) as caught:
        _run(datafusion_pipeline, act)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_case_list_covers_every_construct() -> None:
    ids = " ".join(c.id for c in CASES)
    for construct in ("projection", "filter", "inner-join", "left-join", "union-all", "group-by"):
        assert construct in ids
    for construct in ("distinct", "window", "several-steps", "three-levels"):
        assert construct in ids
    assert dataclasses.asdict(CASES[0])["dataset"] == "proj"
    combo = " ".join(c.id for c in COMBO_CASES)  # what Spark runs
    for construct in ("left-join", "window", "filter", "group-by", "distinct", "inner-join"):
        assert construct in combo


def test_rows_of_a_later_transaction(tmp_path: Path) -> None:
    """A second transaction reads only the new input rows: its rows' witnesses are those, and its
    offsets continue the dataset's."""
    root = tmp_path / "ws"

    async def scenario() -> tuple[list[RowProvenance], list[RowProvenance]]:
        await build(root, "datafusion", ["proj", "grouped"])
        async with await Workspace.open(root) as workspace:
            trades = await workspace.get_dataset("trades")
            rows = [("A", 30.0), ("D", 7.0)]  # offsets 8 and 9, upload 2
            await append_rows(trades, "price", rows, root.parent / "ws-staging", 2)
            for name in ("proj", "grouped"):
                dataset = await workspace.get_dataset(name)
                await update_derivative(
                    workspace, dataset, system_time=Timestamp.of(2024, 4, 1), engines=TEST_ENGINES
                )

        async def act(workspace: Workspace, tracer: Tracer) -> tuple[list, list]:
            proj = await workspace.resolve("proj")
            grouped = await workspace.resolve("grouped")
            (d_group,) = await tracer.select_offsets(grouped.id, "symbol = 'D'")
            (a_group,) = await tracer.select_offsets(grouped.id, "symbol = 'A' AND n = 1")
            return (
                await tracer.explain(proj.id, [8, 9]),
                await tracer.explain(grouped.id, [a_group, d_group]),
            )

        return await _with_tracer(root, act)

    projected, grouped = asyncio.run(scenario())
    assert [(r.offset, r.block_sequence) for r in projected] == [(8, 4), (9, 4)]
    assert [[(w.dataset, w.offset) for w in r.inputs] for r in projected] == [
        [("trades", 8)],
        [("trades", 9)],
    ]
    assert projected[1].inputs[0].ingest is not None
    assert projected[1].inputs[0].ingest.source_state is not None
    assert projected[1].inputs[0].ingest.source_state["value"] == "trades-2.ndjson"
    # the second transaction's group A holds only the new A row (offset 8), not rows 0-5
    assert [[w.offset for w in r.inputs] for r in grouped] == [[8], [9]]
    assert all(r.checked for r in projected + grouped)


def test_slices_written_in_microseconds_under_a_millisecond_schema(tmp_path: Path) -> None:
    """Witness rows are cut out of slices in the slices' own types (here microsecond timestamps,
    as some writers store them), so the check re-runs on what the transaction read."""
    from protocol.codec.yaml import load_snapshot
    from tests.console.pipelines import derivative
    from tests.replication.datagen import create_root

    root = tmp_path / "ws"

    async def scenario() -> RowProvenance:
        async with await Workspace.init(root) as workspace:
            await create_root(workspace, "cities", slices=2, rows=5, seed=3)
            text = derivative(
                "cities.upper", ["cities"], 'SELECT event_time, upper(value) AS v FROM "cities"'
            )
            dataset = await workspace.create_from_snapshot(
                load_snapshot(text.replace("engine: spark", "engine: datafusion"), "cities.upper")
            )
            await update_derivative(workspace, dataset, engines=TEST_ENGINES)

        async def act(workspace: Workspace, tracer: Tracer) -> RowProvenance:
            record = await workspace.resolve("cities.upper")
            return (await tracer.explain(record.id, [7]))[0]

        return await _with_tracer(root, act)

    row = asyncio.run(scenario())
    assert row.checked and [(w.dataset, w.offset) for w in row.inputs] == [("cities", 7)]
    assert row.values is not None and row.inputs[0].values is not None
    assert row.values["v"] == row.inputs[0].values["value"].upper()
