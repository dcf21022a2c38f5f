"""``odfd sql``: run a Spark SQL query over the workspace's datasets.

Each dataset is a table named by its alias (quote aliases containing dots or slashes with
backticks: ``SELECT * FROM `com.example.trades```). ``--as-of`` pins every dataset to what the
node knew at a block or a time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from pathlib import Path

import pyarrow as pa

from odfd.cli import console
from odfd.cli.data_output import FORMATS, check_output_args, write_result
from odfd.cli.output import add_output_format
from odfd.cli.sql_script import history_file, shell_statements, split_statements
from odfd.cli.workspace_args import add_root_argument, run_in_workspace
from odfd.coordinator.engine import configure_engine
from odfd.coordinator.query import AsOf, DatasetView, dataset_view, resolve_as_of
from protocol.errors import OdfError
from protocol.identity import Multihash
from protocol.model import Timestamp
from storage.workspace import Workspace
from verifier.engine.collect import ordered_batches
from verifier.engine.columns import quote
from verifier.engine.failures import spark_failures
from verifier.engine.session import isolated_session
from verifier.engine.transform import InvalidQueryError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sql",
        help="query datasets with Spark SQL (a shell when no query is given)",
        description="Runs a query (QUERY, -c, or --script FILE with ;-separated statements). "
        "With none on a terminal, opens an interactive shell (multi-line statements end with ;, "
        "history kept in the workspace, \\q to leave); with none and a pipe, runs stdin as a script.",
    )
    parser.add_argument(
        "query",
        nargs="?",
        metavar="QUERY",
        help="a Spark SQL query; datasets are tables named by alias",
    )
    parser.add_argument("-c", "--command", metavar="QUERY", help="the query (same as QUERY)")
    parser.add_argument(
        "--script", type=Path, metavar="FILE", help="run the ;-separated statements in FILE"
    )
    add_output_format(parser, FORMATS)
    parser.add_argument(
        "--output-path", type=Path, metavar="FILE", help="write to FILE (required for parquet)"
    )
    parser.add_argument(
        "--as-of", metavar="BLOCK|TIME", help="query the datasets as of a block hash or time"
    )
    add_root_argument(parser)
    parser.set_defaults(func=_sql)


def _sql(args: argparse.Namespace) -> int:
    # Every argument error comes before the workspace is opened or Spark starts.
    given = [q for q in (args.query, args.command) if q is not None]
    if len(given) + (args.script is not None) > 1:
        raise InvalidQueryError("give one of QUERY, -c QUERY and --script FILE")
    check_output_args(args.output, args.output_path)
    statements: list[str] | None = None
    if given:
        statements = [given[0]]
    elif args.script is not None:
        statements = split_statements(_read_script(args.script))
    elif not sys.stdin.isatty():
        statements = split_statements(sys.stdin.read())
    if statements is not None and not statements:
        raise InvalidQueryError(f"{args.script or 'stdin'}: holds no SQL statement")
    if statements is not None and len(statements) > 1 and args.output_path is not None:
        raise InvalidQueryError("--output-path takes the result of a single statement")

    async def run(workspace: Workspace) -> int:
        configure_engine(workspace.layout.config_path)
        block = time = None
        if args.as_of:
            block, time = await resolve_as_of(workspace, AsOf.parse(args.as_of))
        if statements is not None:
            for statement in statements:
                table = await _query(workspace, statement, block, time)
                write_result(table, args.output, args.output_path)
            return 0
        return await _shell(workspace, args, block, time)

    return run_in_workspace(args, run)


async def _query(
    workspace: Workspace, query: str, block: Multihash | None, time: Timestamp | None
) -> pa.Table:
    views = []
    lowered = query.lower()
    for record in await workspace.list_datasets():
        if record.alias.lower() in lowered:
            dataset = workspace.open_dataset(record.id)
            views.append(await dataset_view(dataset, pinned_block=block, pinned_time=time))
    return await asyncio.to_thread(run_query, query, views)


async def _shell(
    workspace: Workspace, args: argparse.Namespace, block: Multihash | None, time: Timestamp | None
) -> int:
    """The interactive shell: a failed statement prints its error and the shell goes on."""
    import readline

    history = history_file(workspace.root)
    with contextlib.suppress(OSError):
        readline.read_history_file(history)
    console.info("odfd SQL shell: end statements with ;  leave with \\q or Ctrl-D")
    try:
        for statement in shell_statements(input):
            try:
                table = await _query(workspace, statement, block, time)
            except OdfError as err:
                console.error(str(err))
                continue
            write_result(table, args.output, None)
    finally:
        with contextlib.suppress(OSError):
            readline.write_history_file(history)
    return 0


def _read_script(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise InvalidQueryError(f"cannot read the script {path}: {reason}") from None


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
