"""Every private or undocumented PySpark API odfd uses (``verifier.engine.spark.internals``) still
exists and behaves as used: a PySpark upgrade that breaks one fails here, naming it.

Classic PySpark's are run on the tests' session. Spark Connect's need a server: here their
signatures and attributes are checked; ``tests/pipeline/test_connect.py`` runs them end to end
(streamed and staged results, determinism checks, session release) through a real server.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from verifier.engine.spark import internals

pytestmark = pytest.mark.spark


def test_spark_home_holds_the_jars_and_scripts_odfd_runs() -> None:
    home = internals.spark_home()
    assert (home / "bin" / "spark-submit").is_file()
    assert list((home / "jars").glob("spark-core_*.jar")), "the plugin compiles against these"
    assert list((home / "jars").glob("spark-connect_*.jar")), "the Connect server's main class"


def test_schemas_convert_both_ways_with_timestamps_in_utc() -> None:
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    spark_schema = StructType(
        [
            StructField("id", LongType()),
            StructField("name", StringType()),
            StructField("at", TimestampType()),
        ]
    )
    arrow = internals.to_arrow_schema(spark_schema)
    assert arrow == pa.schema(
        [("id", pa.int64()), ("name", pa.string()), ("at", pa.timestamp("us", tz="UTC"))]
    )
    assert internals.from_arrow_schema(arrow) == spark_schema


def test_arrow_collection_sends_batches_then_their_order(spark: SparkSession) -> None:
    df = spark.range(0, 10_000, 1, 4).selectExpr("id", "id * 2 AS twice")
    batches: list[pa.RecordBatch] = []
    orders: list[list[int]] = []
    with internals.arrow_collection(df) as items:
        for item in items:
            if isinstance(item, pa.RecordBatch):
                batches.append(item)
            else:
                orders.append(list(item))
    assert len(orders) == 1 and sorted(orders[0]) == list(range(len(batches)))
    table = pa.Table.from_batches([batches[i] for i in orders[0]])
    assert table.column("id").to_pylist() == list(range(10_000))


def test_arrow_collection_raises_the_jobs_failure_on_exit(spark: SparkSession) -> None:
    from pyspark.errors import PySparkException

    failing = spark.sql("SELECT cast(id AS tinyint) AS t FROM range(0, 1000, 1, 1)")
    with pytest.raises(PySparkException), internals.arrow_collection(failing) as items:
        list(items)


def test_the_analysed_plan_says_whether_it_is_deterministic(spark: SparkSession) -> None:
    tree, deterministic = internals.analyzed_plan(spark.sql("SELECT id FROM range(3)"))
    assert deterministic and "Range" in tree
    tree, deterministic = internals.analyzed_plan(spark.sql("SELECT rand() AS r"))
    assert not deterministic and "rand(" in tree


def test_a_threads_job_group_can_be_cleared(spark: SparkSession) -> None:
    context = spark.sparkContext
    context.setJobGroup("odfd-internals-test", "a group", interruptOnCancel=True)
    assert context.getLocalProperty("spark.jobGroup.id") == "odfd-internals-test"
    internals.clear_job_group(context)
    assert context.getLocalProperty("spark.jobGroup.id") is None


def test_classic_objects_are_not_connect_ones(spark: SparkSession) -> None:
    assert not internals.is_connect(spark)
    assert not internals.is_connect(spark.range(1))


def test_the_connect_mode_switch_is_the_one_pyspark_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pyspark.sql.utils import is_remote

    monkeypatch.delenv(internals.CONNECT_MODE_ENV, raising=False)
    assert not is_remote()
    monkeypatch.setenv(internals.CONNECT_MODE_ENV, "1")
    assert is_remote()


def test_the_connect_client_api_odfd_calls_is_there() -> None:
    from pyspark.sql.connect.client.core import SparkConnectClient
    from pyspark.sql.connect.conf import RuntimeConf
    from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame
    from pyspark.sql.connect.plan import LogicalPlan
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    assert internals.is_connect.__module__ and ConnectSession.__module__.startswith(
        "pyspark.sql.connect"
    )
    assert "connection" in inspect.signature(ConnectSession.__init__).parameters
    assert isinstance(inspect.getattr_static(ConnectSession, "client"), property)
    assert list(inspect.signature(SparkConnectClient.to_table_as_iterator).parameters) == [
        "self",
        "plan",
        "observations",
    ]
    for method in ("set_retry_policies", "release_session"):
        assert callable(getattr(SparkConnectClient, method)), method
    assert "self._channel = " in inspect.getsource(SparkConnectClient.__init__)
    # divert_close: a collected session closes its client, which must reach the diverted close
    assert "self.client.close()" in inspect.getsource(ConnectSession.__del__)
    assert list(inspect.signature(RuntimeConf._set_all).parameters) == [
        "self",
        "configs",
        "silent",
    ]
    assert "extended" in inspect.signature(ConnectDataFrame._explain_string).parameters
    assert "self._plan" in inspect.getsource(ConnectDataFrame.__init__)
    assert callable(LogicalPlan.to_proto)
    assert isinstance(inspect.getattr_static(LogicalPlan, "observations"), property)


def test_nothing_else_touches_pysparks_private_names() -> None:
    """The private names above appear in the internals module only. (Outside the Spark package
    nothing even imports PySpark: ``tests/test_architecture.py``.)"""
    package = Path(internals.__file__).parent
    private = (
        "._jdf",
        "._jsc",
        "._plan",
        "_load_from_socket",
        "._set_all",
        "._explain_string",
        "release_session",
        "set_retry_policies",
        "to_table_as_iterator",
        "ArrowCollectSerializer",
        "unwrap_spark_exception",
        "pyspark.sql.pandas",
        "pyspark.sql.connect",
        "pyspark.util",
        "SPARK_CONNECT_MODE_ENABLED",
        "pyspark.__file__",
    )
    offenders = [
        f"{path.name}: {name}"
        for path in sorted(package.glob("*.py"))
        if path.name != "internals.py"
        for name in private
        if name in path.read_text()
    ]
    assert offenders == []


def test_ddl_is_parsed_by_the_session_at_hand(spark: SparkSession) -> None:
    """A legacy ``ddlSchema`` keeps NOT NULL; the Connect branch is taken by the Connect test's
    ``ddl schema`` ingest (``tests/pipeline/test_connect.py``)."""
    parsed = internals.parse_ddl(spark, "city STRING, population BIGINT NOT NULL")
    assert [(f.name, f.dataType.simpleString(), f.nullable) for f in parsed.fields] == [
        ("city", "string", True),
        ("population", "bigint", False),
    ]
