"""``odfd sql``: run a Spark SQL query over the workspace's datasets.

Each dataset is a table named by its alias (quote aliases containing dots or slashes with
backticks: ``SELECT * FROM `com.example.trades```). ``--as-of`` pins every dataset to what the
node knew at a block or a time.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import pyarrow as pa

from odfd.cli.data_output import FORMATS, write_result
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from odfd.coordinator.engine import configure_engine
from odfd.coordinator.query import AsOf, DatasetView, dataset_view, resolve_as_of
from storage.workspace import Workspace
from verifier.engine.collect import ordered_batches
from verifier.engine.columns import quote
from verifier.engine.failures import spark_failures
from verifier.engine.session import isolated_session
from verifier.engine.transform import InvalidQueryError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sql", help="query datasets with Spark SQL")
    parser.add_argument(
        "query", metavar="QUERY", help="a Spark SQL query; datasets are tables named by alias"
    )
    parser.add_argument("--output", "-o", choices=FORMATS, default="table", help="output format")
    parser.add_argument(
        "--output-path", type=Path, metavar="FILE", help="write to FILE (required for parquet)"
    )
    parser.add_argument(
        "--as-of", metavar="BLOCK|TIME", help="query the datasets as of a block hash or time"
    )
    add_root_argument(parser)
    parser.set_defaults(func=_sql)


def _sql(args: argparse.Namespace) -> int:
    async def run(workspace: Workspace) -> int:
        configure_engine(workspace.layout.config_path)
        block = time = None
        if args.as_of:
            block, time = await resolve_as_of(workspace, AsOf.parse(args.as_of))
        views = []
        lowered = args.query.lower()
        for record in await workspace.list_datasets():
            if record.alias.lower() in lowered:
                dataset = workspace.open_dataset(record.id)
                views.append(await dataset_view(dataset, pinned_block=block, pinned_time=time))
        table = await asyncio.to_thread(run_query, args.query, views)
        write_result(table, args.output, args.output_path)
        return 0

    return run_in_workspace(args, run)


def run_query(query: str, views: list[DatasetView]) -> pa.Table:
    """Runs ``query`` in Spark with each dataset registered as a view; blocking."""
    from pyspark.errors import AnalysisException, ParseException
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructType

    spark = isolated_session()
    for view in views:
        if view.paths:
            df = spark.read.option("mergeSchema", "true").parquet(*map(str, view.paths))
        elif view.schema is not None:
            df = spark.createDataFrame([], from_arrow_schema(view.schema))
        else:  # no data yet: a table without columns or rows, as the reference answers
            df = spark.createDataFrame([], StructType([]))
        df.createOrReplaceTempView(quote(view.alias))
    try:
        result = spark.sql(query)
    except (AnalysisException, ParseException) as err:
        raise InvalidQueryError(f"query is invalid: {str(err).strip().splitlines()[0]}") from err
    with spark_failures("the query"), ordered_batches(result) as (schema, batches):
        return pa.Table.from_batches(list(batches), schema)
