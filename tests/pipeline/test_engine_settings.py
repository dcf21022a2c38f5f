"""Spark settings: what operators may set, what odfd pins, and that sessions carry the pins."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from verifier.engine.spark.jvm_plugin import SHUFFLE_MANAGER
from verifier.engine.spark.session import isolated_session
from verifier.engine.spark.settings import DETERMINISM, STARTUP, SparkConfigError, SparkSettings


def test_settings_from_config_table() -> None:
    settings = SparkSettings.from_config(
        {
            "master": "spark://head:7077",
            "driver_memory": "4g",
            "conf": {"spark.executor.cores": 4, "spark.x": True},
        }
    )
    conf = settings.spark_conf(Path("/opt/odfd-spark.jar"))
    assert conf["spark.master"] == "spark://head:7077"
    assert conf["spark.driver.memory"] == "4g"
    assert conf["spark.executor.cores"] == "4" and conf["spark.x"] == "true"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.shuffle.manager"] == SHUFFLE_MANAGER
    assert conf["spark.jars"] == "/opt/odfd-spark.jar"
    default = SparkSettings.from_config(None).spark_conf(Path("/opt/odfd-spark.jar"))
    assert default["spark.master"] == "local[*]"
    # Slices are streamed to disk, so results above Spark's 1 GiB default cap must be allowed...
    assert default["spark.driver.maxResultSize"] == "0"
    # ...unless the operator sets a cap.
    capped = SparkSettings.from_config({"conf": {"spark.driver.maxResultSize": "2g"}})
    assert capped.spark_conf(Path("/opt/odfd-spark.jar"))["spark.driver.maxResultSize"] == "2g"


def test_the_plugin_jar_joins_the_operators_class_path_and_jars() -> None:
    settings = SparkSettings.from_config(
        {"conf": {"spark.jars": "/opt/udf.jar", "spark.driver.extraClassPath": "/opt/lib/*"}}
    )
    conf = settings.spark_conf(Path("/opt/odfd-spark.jar"))
    assert conf["spark.jars"] == "/opt/odfd-spark.jar,/opt/udf.jar"
    assert conf["spark.driver.extraClassPath"] == f"/opt/odfd-spark.jar{os.pathsep}/opt/lib/*"


def test_shared_filesystem_is_a_flag_from_config_or_environment() -> None:
    assert SparkSettings.from_config(None).shared_filesystem is False
    assert SparkSettings.from_config({"shared_filesystem": True}).shared_filesystem is True
    assert SparkSettings.from_config({"shared_filesystem": "false"}).shared_filesystem is False
    with pytest.raises(SparkConfigError, match=r"shared_filesystem: expected true or false"):
        SparkSettings.from_config({"shared_filesystem": "yes"})


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"conf": {"spark.sql.shuffle.partitions": "200"}}, "fixed by odfd"),
        ({"conf": {"spark.master": "local[1]"}}, "fixed by odfd"),
        ({"conf": {"spark.shuffle.manager": "sort"}}, "fixed by odfd"),
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
    for key, value in STARTUP.items():
        assert fresh.sparkContext.getConf().get(key) == value, key
    session.createDataFrame([(1,)], "x int").createTempView("only_here")
    assert "only_here" not in [t.name for t in fresh.catalog.listTables()]


def test_releasing_a_session_whose_server_is_gone_does_not_wait_on_retries() -> None:
    """A collected Connect session is released once; the client's own retries (minutes against
    a dead server) once held a daemon's exit past its shutdown timeout."""
    script = (
        "import os, socket, time\n"
        "os.environ['SPARK_CONNECT_MODE_ENABLED'] = '1'\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]; s.close()\n"
        "from verifier.engine.spark import release, session\n"
        "connect = session._connect_session(f'sc://127.0.0.1:{port}')\n"
        "release.release(connect.client)\n"
        "print('released')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "released"
