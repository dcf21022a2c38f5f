"""``docs/query-api.md`` as a pandas user runs it: requests against a live node, the recipe's
code taken from the page itself, and each value rendering the page's table promises."""

from __future__ import annotations

import decimal
import re
from pathlib import Path
from typing import Any

import pandas
import requests

from tests.query_api.conftest import Served
from tests.query_api.datasets import POPULATION

DOC = Path(__file__).parents[2] / "docs" / "query-api.md"

TYPED = (
    "select 1 as n, arrow_cast(12.5, 'Decimal128(10, 2)') as amount, "
    "to_timestamp('2024-01-02T03:04:05.5Z') as at, "
    "arrow_cast(to_timestamp('2024-01-02T03:04:05Z'), 'Timestamp(Second, Some(\"+02:00\"))') "
    "as local, arrow_cast(to_timestamp('2024-01-02T03:04:05Z'), 'Timestamp(Second, None)') "
    "as naive, date '2024-01-02' as day, time '03:04:05' as tm, "
    "arrow_cast(1, 'Duration(Second)') as du, X'0102' as b, 'NaN'::double as nan, "
    "make_array(1, 2) as xs, named_struct('a', 1) as s, cast(null as varchar) as nothing"
)


def _recipe() -> str:
    """The page's pandas block, with its node URL for this one's."""
    found = re.search(r"## pandas, types kept\n\n```python\n(.*?)```", DOC.read_text(), re.S)
    assert found is not None
    return found.group(1)


def _run_recipe(served: Served, sql: str) -> Any:
    code = _recipe().replace("http://node:8080/", served.url)
    code = code.replace("'select * from \"alice/trades\" order by offset desc'", repr(sql))
    namespace: dict[str, Any] = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    return namespace["df"]


def test_the_pages_pandas_recipe_keeps_order_and_types(served: Served) -> None:
    df = _run_recipe(served, TYPED)
    assert list(df.columns) == [
        "n", "amount", "at", "local", "naive", "day", "tm", "du", "b", "nan", "xs", "s", "nothing"
    ]  # fmt: skip
    assert str(df["n"].dtype) == "int64"
    assert str(df["at"].dtype).startswith("datetime64[") and str(df["at"].dtype).endswith("UTC]")
    assert df["at"][0] == pandas.Timestamp("2024-01-02T03:04:05.5Z")
    assert df["local"][0] == pandas.Timestamp("2024-01-02T03:04:05Z")  # +02:00, same instant
    assert df["amount"][0] == decimal.Decimal("12.50")
    assert isinstance(df["amount"][0], decimal.Decimal)
    assert df["nothing"][0] is None
    population = _run_recipe(served, f'select * from "{POPULATION}" order by offset')
    assert list(population["city"]) == ["A", "B"]
    assert str(population["event_time"].dtype).endswith("UTC]")


def test_values_come_out_as_the_pages_table_says(served: Served) -> None:
    reply = requests.get(served.url + "query", params={"query": TYPED}, timeout=60)
    assert reply.status_code == 200
    assert reply.json()["output"]["data"] == [
        {
            "n": 1,
            "amount": "12.50",
            "at": "2024-01-02T03:04:05.500Z",
            "local": "2024-01-02T05:04:05+02:00",
            "naive": "2024-01-02T03:04:05",
            "day": "2024-01-02",
            "tm": "03:04:05",
            "du": "PT1S",
            "b": "0102",
            "nan": None,
            "xs": [1, 2],
            "s": {"a": 1},
            "nothing": None,
        }
    ]
    keys = list(reply.json()["output"]["data"][0])
    assert keys == sorted(keys)  # /query's objects: keys sorted, as the page says
    aoa = requests.get(
        served.url + "query", params={"query": TYPED, "dataFormat": "JsonAoA"}, timeout=60
    ).json()["output"]["data"]
    assert aoa[0][11] == [1]  # a struct in JsonAoA: its field values, in order
    tail = requests.get(served.url + f"{POPULATION}/tail", timeout=60).json()["data"]
    assert list(tail[0])[:3] == ["offset", "op", "system_time"]  # tail: the schema's order
