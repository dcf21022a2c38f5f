"""The JSON functions of odfd's DataFusion engine, restating the documented behaviour of the crate
the reference engine registers (``datafusion-contrib/datafusion-functions-json``, its README: the
``json_contains`` / ``->`` example over ``test_table``, and its list of functions and operators).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from protocol.model import SqlQueryStep
from verifier.engine.contract import QueryTable
from verifier.engine.datafusion.engine import DataFusionEngine
from verifier.engine.datafusion.json_functions import Call, rewrite

ENGINE = DataFusionEngine()
README_ROWS = [
    (1, "{}"),
    (2, '{ "a": 1 }'),
    (3, '{ "a": 2 }'),
    (4, '{ "a": 1, "b": 2 }'),
    (5, '{ "a": 1, "b": 2, "c": 3 }'),
]
DOCUMENT = (
    '{"name": "x", "n": 7, "f": 1.5, "ok": true, "none": null, '
    '"obj": {"k": [10, {"deep": "v"}, "s"]}, "big": 18446744073709551616, "dup": 1, "dup": 2}'
)


def run(tmp_path: Path, sql: str, rows: Sequence[tuple[int, str | None]]) -> list[dict]:
    table = pa.table(
        {"id": [r[0] for r in rows], "json_col": pa.array([r[1] for r in rows], pa.string())}
    )
    path = tmp_path / "test_table.parquet"
    pq.write_table(table, path)
    tables = [QueryTable("test_table", (path,), table.schema)]
    return ENGINE.query([SqlQueryStep(query=sql)], tables).to_pylist()


def test_readme_json_contains(tmp_path: Path) -> None:
    """The README's first example: which documents have the key 'b'."""
    rows = run(
        tmp_path,
        "SELECT id, json_contains(json_col, 'b') as json_contains FROM test_table",
        README_ROWS,
    )
    assert [(r["id"], r["json_contains"]) for r in rows] == [
        (1, False),
        (2, False),
        (3, False),
        (4, True),
        (5, True),
    ]


def test_readme_arrow_operator(tmp_path: Path) -> None:
    """The README's second example, ``json_col->'a'``: a missing key is null, a present one
    its value (odfd's ``json_get`` gives the value's JSON text where the crate gives a union)."""
    rows = run(tmp_path, "SELECT id, json_col->'a' as json_col_a FROM test_table", README_ROWS)
    assert [r["json_col_a"] for r in rows] == [None, "1", "2", "1", "1"]
    rows = run(tmp_path, "SELECT json_col->'a'::int as a FROM test_table", README_ROWS)
    assert [r["a"] for r in rows] == [None, 1, 2, 1, 1]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("json_get_str(json_col, 'name')", "x"),
        ("json_get_str(json_col, 'n')", None),  # not a string
        ("json_get_int(json_col, 'n')", 7),
        ("json_get_int(json_col, 'f')", None),  # not an integer
        ("json_get_int(json_col, 'big')", None),  # beyond Int64
        ("json_get_int(json_col, 'dup')", 1),  # the first of repeated keys
        ("json_get_float(json_col, 'f')", 1.5),
        ("json_get_float(json_col, 'n')", 7.0),
        ("json_get_bool(json_col, 'ok')", True),
        ("json_get_bool(json_col, 'n')", None),
        ("json_get_json(json_col, 'obj')", '{"k": [10, {"deep": "v"}, "s"]}'),  # as written
        ("json_get_str(json_col, 'obj', 'k', 1, 'deep')", "v"),  # keys and indexes
        ("json_get_int(json_col, 'obj', 'k', 0)", 10),
        ("json_get_int(json_col, 'obj', 'k', 9)", None),
        ("json_get_int(json_col, 'obj', 0)", None),  # an index into an object
        ("json_as_text(json_col, 'name')", "x"),
        ("json_as_text(json_col, 'n')", "7"),
        ("json_as_text(json_col, 'obj', 'k')", '[10, {"deep": "v"}, "s"]'),
        ("json_as_text(json_col, 'none')", None),
        ("json_col->>'name'", "x"),
        ("json_col->'obj'->'k'->>2", "s"),
        ("json_length(json_col)", 9),
        ("json_length(json_col, 'obj', 'k')", 3),
        ("json_length(json_col, 'n')", None),
        ("json_contains(json_col, 'none')", True),  # a null value is there
        ("json_contains(json_col, 'obj', 'k', 2)", True),
        ("json_contains(json_col, 'missing')", False),
        ("json_get(json_col, 'n')::bigint", 7),
        ("json_get(json_col, 'name')::string", "x"),
    ],
)
def test_functions(tmp_path: Path, expression: str, expected: object) -> None:
    rows = run(tmp_path, f"SELECT {expression} AS v FROM test_table", [(1, DOCUMENT)])
    assert rows == [{"v": expected}]


def test_null_and_malformed_documents_give_null(tmp_path: Path) -> None:
    rows = run(
        tmp_path,
        "SELECT json_get_int(json_col, 'a') AS a, json_length(json_col) AS n FROM test_table",
        [(1, None), (2, "{not json"), (3, '{"a": 1}')],
    )
    assert rows == [{"a": None, "n": None}, {"a": None, "n": None}, {"a": 1, "n": 1}]


def test_result_types_are_the_crates(tmp_path: Path) -> None:
    table = pa.table({"id": [1], "json_col": [DOCUMENT]})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    result = ENGINE.query(
        [
            SqlQueryStep(
                query="SELECT json_get_int(json_col, 'n') i, json_get_float(json_col, 'f') f, "
                "json_get_bool(json_col, 'ok') b, json_length(json_col) l, "
                "json_get_str(json_col, 'name') s FROM test_table"
            )
        ],
        [QueryTable("test_table", (path,), table.schema)],
    )
    assert [str(f.type) for f in result.schema] == ["int64", "double", "bool", "uint64", "string"]


def test_rewrite_binds_each_signature_once_and_leaves_text_alone() -> None:
    [(text, calls)] = rewrite(
        "select '->' as s, \"json_get\", x->'a' as a, json_get_str(y, 'k', 0) from t -- json_x"
    )
    assert text == (
        "select '->' as s, \"json_get\", json_get(x, 'a') as a, json_get_str(y, 'k', 0) "
        "from t -- json_x"
    )
    assert calls == {Call("json_get", "s"): "json_get", Call("json_get_str", "si"): "json_get_str"}
    [(text, calls)] = rewrite("select json_length(a), json_length(a, 'k') from t")
    assert text == "select json_length__none(a), json_length__s(a, 'k') from t"
    assert set(calls.values()) == {"json_length__none", "json_length__s"}
    assert rewrite("select 1") == [("select 1", {})]
    # a key column: an array index if it plans as an integer, else an object key
    assert [c for _, c in rewrite("select json_get_int(j, k) from t")] == [
        {Call("json_get_int", "i"): "json_get_int"},
        {Call("json_get_int", "s"): "json_get_int"},
    ]


def test_key_columns_index_arrays_or_select_members_by_their_type(tmp_path: Path) -> None:
    """As the crate decides by the key's type: an integer key column indexes an array, a
    text one selects an object member (a text "1" selects no array item)."""
    table = pa.table(
        {
            "doc": ["[10, 20, 30]", '{"1": "one", "b": "bee"}'],
            "index": pa.array([2, 1], pa.int32()),
            "name": ["1", "b"],
        }
    )
    path = tmp_path / "keys.parquet"
    pq.write_table(table, path)
    result = ENGINE.query(
        [
            SqlQueryStep(
                query="SELECT json_as_text(doc, index) AS by_index, "
                "json_as_text(doc, name) AS by_name FROM keys"
            )
        ],
        [QueryTable("keys", (path,), table.schema)],
    )
    assert result.to_pylist() == [
        {"by_index": "30", "by_name": None},
        {"by_index": None, "by_name": "bee"},
    ]


JSON_DERIVATIVE = """\
kind: DatasetSnapshot
version: 1
content:
  name: parsed
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: nums
      transform:
        kind: Sql
        engine: datafusion
        queries:
          - alias: docs
            query: >-
              SELECT event_time, '{"v": ' || cast(value AS varchar) || ', "tags": ["a", "b"]}' AS doc
              FROM nums
          - query: >-
              SELECT event_time, json_get_int(doc, 'v') * 2 AS doubled, doc->'tags'->>1 AS tag,
              json_length(doc, 'tags') AS tags FROM docs
"""


def test_a_pipeline_using_them_runs_verifies_and_is_traced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A derivative calling the JSON functions is pulled, then re-executed by ``verify`` (no
    longer reported as cannot-verify) and traced by ``provenance``."""
    import asyncio

    from storage.workspace import Workspace
    from tests.cli.helpers import run as odfd
    from tests.verifier.builders import root_with_slices

    ws = tmp_path / "ws"

    async def build() -> None:
        async with await Workspace.init(ws) as workspace:
            await root_with_slices(workspace, "nums", [[1, 2], [3]])

    asyncio.run(build())
    manifest = tmp_path / "parsed.yaml"
    manifest.write_text(JSON_DERIVATIVE)
    assert odfd(capsys, "-q", "add", "--root", str(ws), str(manifest))[0] == 0
    code, _, err = odfd(capsys, "pull", "--root", str(ws), "parsed")
    assert code == 0, err
    code, out, err = odfd(
        capsys,
        "sql",
        "--root",
        str(ws),
        'SELECT doubled, tag, tags FROM parsed ORDER BY "offset"',
        "--output",
        "json",
    )
    assert code == 0, err
    assert json.loads(out) == [
        {"doubled": 2, "tag": "b", "tags": 2},
        {"doubled": 4, "tag": "b", "tags": 2},
        {"doubled": 6, "tag": "b", "tags": 2},
    ]
    code, out, err = odfd(capsys, "verify", "--root", str(ws), "parsed")
    assert code == 0, out + err
    assert "reproducibility      ok             1 transactions, 3 records" in out + err
    # provenance rewrites the JSON calls and operators as row-wise functions and re-runs them
    code, out, err = odfd(capsys, "provenance", "--root", str(ws), "parsed", "--offset", "1")
    assert code == 0, err
    assert "doubled=4, tag=b, tags=2  [1 witness row(s), checked by re-execution]" in out
    assert "nums offset 1 " in out
