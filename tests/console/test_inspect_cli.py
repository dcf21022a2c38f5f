"""``odfd inspect lineage|schema|query`` on a three-level pipeline (every lineage format), an
unknown dataset, and a wide graph of 200 inputs."""

from __future__ import annotations

import asyncio
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from odfd.cli.main import main
from storage.workspace import Workspace
from tests.console.pipelines import MIDDLE, ROOT, TOP, three_levels, wide

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("inspect") / "ws"

    async def build() -> dict[str, str]:
        async with await Workspace.init(root) as workspace:
            return {alias: str(i) for alias, i in (await three_levels(workspace)).items()}

    return root, asyncio.run(build())


def _number(element: ET.Element | None, name: str) -> float:
    """A numeric attribute of an SVG element (both must be there)."""
    assert element is not None
    value = element.get(name)
    assert value is not None
    return float(value)


def _run(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, str, str]:
    code = main(["inspect", *args, "--root", str(root)])
    out, err = capsys.readouterr()
    return code, out, err


def test_lineage_tree_upstream_and_downstream(pipeline, capsys) -> None:
    root, _ = pipeline
    code, out, _ = _run(capsys, root, "lineage", TOP)
    assert code == 0
    assert out.splitlines() == [
        "cities.top (Derivative)",
        "└── cities.values (Derivative)",
        "    └── cities (Root)",
    ]
    code, out, _ = _run(capsys, root, "lineage", MIDDLE, "--downstream")
    lines = out.splitlines()
    assert lines[:2] == ["cities.values (Derivative)", "└── cities (Root)"]
    assert lines[-2:] == ["cities.values (Derivative)", "└── cities.top (Derivative)"]


def test_lineage_dot_json_and_html(pipeline, capsys) -> None:
    root, ids = pipeline
    _, out, _ = _run(capsys, root, "lineage", TOP, "-o", "dot")
    assert out.startswith("digraph lineage {")
    assert f'"{ids[ROOT]}" -> "{ids[MIDDLE]}";' in out
    assert f'"{ids[MIDDLE]}" -> "{ids[TOP]}";' in out
    assert f'"{ids[TOP]}" [label="cities.top", penwidth=2];' in out

    _, out, _ = _run(capsys, root, "lineage", ROOT, "--downstream", "-o", "json")
    graph = json.loads(out)
    assert graph["root"] == ids[ROOT]
    assert [(n["alias"], n["kind"]) for n in graph["nodes"]] == [
        (ROOT, "Root"),
        (TOP, "Derivative"),
        (MIDDLE, "Derivative"),
    ]
    assert sorted((e["from"], e["to"]) for e in graph["edges"]) == sorted(
        [(ids[ROOT], ids[MIDDLE]), (ids[MIDDLE], ids[TOP])]
    )

    target = root.parent / "lineage.html"
    code, out, _ = _run(capsys, root, "lineage", TOP, "-o", "html", "--output-path", str(target))
    assert code == 0 and out == ""
    page = target.read_text()
    svg = ET.fromstring(page[page.index("<svg") : page.index("</svg>") + 6])
    nodes = {g.findtext(f"{SVG}text"): g for g in svg.iter(f"{SVG}g")}
    assert set(nodes) == {ROOT, MIDDLE, TOP}
    assert len(list(svg.iter(f"{SVG}path"))) == 1 + 2  # the arrow marker and two edges
    # Laid out in layers: each input left of the dataset that reads it.
    x = {alias: _number(g.find(f"{SVG}rect"), "x") for alias, g in nodes.items()}
    assert x[ROOT] < x[MIDDLE] < x[TOP]


def test_unknown_dataset_is_a_one_line_error(pipeline, capsys) -> None:
    root, _ = pipeline
    code, out, err = _run(capsys, root, "lineage", "no.such.dataset")
    assert code == 1 and out == ""
    assert err.strip() == f"error: no dataset no.such.dataset in the workspace at {root}"
    code, _, err = _run(capsys, root, "schema", "no.such.dataset")
    assert code == 1 and "no dataset no.such.dataset" in err


def test_schema_and_query(pipeline, capsys) -> None:
    root, _ = pipeline
    _, out, _ = _run(capsys, root, "schema", ROOT, "-o", "ddl")
    assert out.splitlines() == [
        "offset BIGINT NOT NULL,",
        "op INT NOT NULL,",
        "system_time TIMESTAMP NOT NULL,",
        "event_time TIMESTAMP NOT NULL,",
        "value STRING NOT NULL",
    ]
    _, out, _ = _run(capsys, root, "schema", ROOT, "-o", "json")
    document = json.loads(out)
    assert [f["name"] for f in document["arrow"]][-1] == "value"
    assert [f["name"] for f in document["odf"]["schema"]["fields"]][-1] == "value"
    code, _, err = _run(capsys, root, "schema", TOP)
    assert code == 1 and "has no schema yet" in err

    _, out, _ = _run(capsys, root, "query", TOP)
    assert out.splitlines()[0].startswith("block 1 (")
    assert "SetTransform, engine spark, inputs cities.values" in out
    assert "SELECT * FROM `cities.values` WHERE value > 'M'" in out
    _, out, _ = _run(capsys, root, "query", ROOT)
    assert out.strip() == "cities is a Root dataset: no transform"


def test_wide_graph_of_200_inputs_stays_readable(tmp_path: Path, capsys) -> None:
    root = tmp_path / "ws"

    async def build() -> str:
        async with await Workspace.init(root) as workspace:
            return await wide(workspace, 200)

    alias = asyncio.run(build())
    _, out, _ = _run(capsys, root, "lineage", alias)
    lines = out.splitlines()
    assert len(lines) == 201 and lines[0] == "wide.all (Derivative)"
    assert lines[1] == "├── in.000 (Root)" and lines[-1] == "└── in.199 (Root)"
    _, out, _ = _run(capsys, root, "lineage", "in.042", "--downstream", "-o", "json")
    graph = json.loads(out)
    assert [n["alias"] for n in graph["nodes"]] == ["in.042", "wide.all"]
    _, out, _ = _run(capsys, root, "lineage", alias, "-o", "html")
    svg = ET.fromstring(out[out.index("<svg") : out.index("</svg>") + 6])
    # Two columns (inputs, then the derivative), the inputs stacked in one column.
    xs = {_number(r, "x") for r in svg.iter(f"{SVG}rect")}
    assert len(xs) == 2
    assert len(list(svg.iter(f"{SVG}g"))) == 201
