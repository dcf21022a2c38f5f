"""``odfd sql``: run a SQL query over the workspace's datasets, in DataFusion (default) or Spark.

Each dataset is a table named by its alias. DataFusion's dialect, as ``kamu sql``, quotes names
with double quotes (``SELECT * FROM "alice/trades"``, case-sensitive) and starts no JVM;
``--engine spark`` uses Spark SQL, which quotes with backticks (``SELECT * FROM `alice/trades```).
``--as-of`` pins every dataset to what the node knew at a block or a time.
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
from protocol.model import SqlQueryStep
from storage.workspace import Workspace
from verifier.engine.base import QueryTable
from verifier.engine.registry import ENGINE_NAMES, engine_named

DEFAULT_ENGINE = "datafusion"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("sql", help="query datasets with SQL (DataFusion or Spark)")
    parser.add_argument(
        "query", metavar="QUERY", help='a SQL query; datasets are tables named by alias ("a/b")'
    )
    parser.add_argument(
        "--engine",
        choices=ENGINE_NAMES,
        default=DEFAULT_ENGINE,
        help="DataFusion (default; names in double quotes) or Spark SQL (names in backticks)",
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
        if args.engine == "spark":
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
        table = await asyncio.to_thread(run_query, args.query, views, args.engine)
        write_result(table, args.output, args.output_path)
        return 0

    return run_in_workspace(args, run)


def run_query(query: str, views: list[DatasetView], engine: str = DEFAULT_ENGINE) -> pa.Table:
    """Runs ``query`` in ``engine`` with each dataset registered under its alias; blocking."""
    tables = [  # a dataset that did not exist yet (AS OF) is no table at all
        QueryTable(view.alias, view.paths, view.schema) for view in views if view.head is not None
    ]
    return engine_named(engine).query([SqlQueryStep(query=query)], tables)
