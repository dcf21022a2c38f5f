"""Spark settings: what operators may set, what odfd pins, and that sessions carry the pins."""

from __future__ import annotations

import pytest

from verifier.engine.session import isolated_session
from verifier.engine.settings import DETERMINISM, SparkConfigError, SparkSettings


def test_settings_from_config_table() -> None:
    settings = SparkSettings.from_config(
        {"master": "spark://head:7077", "driver_memory": "4g", "conf": {"spark.executor.cores": 4, "spark.x": True}}
    )
    conf = settings.spark_conf()
    assert conf["spark.master"] == "spark://head:7077"
    assert conf["spark.driver.memory"] == "4g"
    assert conf["spark.executor.cores"] == "4" and conf["spark.x"] == "true"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert SparkSettings.from_config(None).spark_conf()["spark.master"] == "local[*]"


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"conf": {"spark.sql.shuffle.partitions": "200"}}, "fixed by odfd"),
        ({"conf": {"spark.master": "local[1]"}}, "fixed by odfd"),
        ({"masterr": "local"}, "unknown key"),
        ({"master": ""}, "non-empty string"),
        ({"conf": ["x"]}, "table of Spark settings"),
    ],
)
def test_invalid_settings_are_rejected(table: dict, message: str) -> None:
    with pytest.raises(SparkConfigError, match=message):
        SparkSettings.from_config(table)


@pytest.mark.spark
def test_isolated_sessions_carry_the_determinism_settings(spark) -> None:
    session = isolated_session()
    session.conf.set("spark.sql.shuffle.partitions", "3")  # a stray change in one transaction...
    fresh = isolated_session()  # ...does not leak into the next
    for key, value in DETERMINISM.items():
        assert fresh.conf.get(key) == value, key
    session.createDataFrame([(1,)], "x int").createTempView("only_here")
    assert "only_here" not in [t.name for t in fresh.catalog.listTables()]
