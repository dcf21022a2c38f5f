"""``odfd sql``: run a SQL query over the workspace's datasets, in DataFusion (default) or Spark.

Each dataset is a table named by its alias. DataFusion's dialect, as ``kamu sql``, quotes names
with double quotes (``SELECT * FROM "alice/trades"``, case-sensitive) and starts no JVM;
``--engine spark`` uses Spark SQL, which quotes with backticks (``SELECT * FROM `alice/trades```).
``--as-of`` pins every dataset to what the node knew at a block or a time. ``odfd sql server``
serves the same tables over Arrow Flight SQL (:mod:`odfd.cli.commands.sql_server`).

``-o json --proof`` prints the whole answer the query API's ``/query`` gives with
``include=Proof``: the input with the block each dataset was read at, the output, the commitment
and the node's ed25519 signature. ``--verify FILE`` checks such a saved answer (this node's or any
other's, the reference's included): on its own, then by re-executing its query at the pinned
blocks here, or on the node ``--remote URL`` names; one line says which check failed.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odfd.app.engine_names import ENGINE_NAMES
from odfd.app.events import Event, event_from_json
from odfd.app.result_formats import FORMATS, check_output_args
from odfd.app.sql import EVENTS, SqlRequest, StatementResult
from odfd.cli import terminal
from odfd.cli.arguments import positive_int
from odfd.cli.commands import sql_server
from odfd.cli.output import add_output_format
from odfd.cli.sql_script import history_file, shell_statements, split_statements
from odfd.cli.workspace_args import add_root_argument, run_in_node
from odfd.errors import OdfdError

if TYPE_CHECKING:
    from odfd.app.node import Node
    from protocol.identity import Multihash
    from protocol.model import Timestamp

#: ``odfd.app.query.DEFAULT_ENGINE``, spelled out so that parsing imports no engine code.
DEFAULT_ENGINE = "datafusion"


class SqlArgumentError(OdfdError):
    """The query arguments contradict each other or name nothing to run."""

    exit_code = 2  # an argument error, as argparse's own


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sql",
        help="query datasets with SQL (DataFusion, or Spark with --engine spark); "
        "a shell when no query is given",
        description="Runs a query (QUERY, -c, or --script FILE with ;-separated statements). "
        "With none on a terminal, opens an interactive shell (multi-line statements end with ;, "
        "history kept in the workspace, \\q to leave); with none and a pipe, runs stdin as a script. "
        f"`odfd sql {sql_server.WORD} [--address A] [--port P]` serves the datasets over Arrow "
        "Flight SQL (kamu.connect, ADBC, JDBC) until interrupted.",
        add_help=False,
    )
    parser.add_argument("-h", "--help", action=_HelpAction, help="show this help message and exit")
    parser.add_argument(
        "--engine",
        choices=ENGINE_NAMES,
        default=DEFAULT_ENGINE,
        help="DataFusion (default; names in double quotes) or Spark SQL (names in backticks)",
    )
    parser.add_argument(
        "query",
        nargs="?",
        metavar="QUERY",
        help='a SQL query; datasets are tables named by alias ("a/b")',
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
    parser.add_argument(
        "--proof",
        action="store_true",
        help="with -o json: print the whole signed answer (input with the datasets' blocks, "
        "output, commitment, the node's did:key signature), as the query API's /query gives it",
    )
    parser.add_argument(
        "--limit",
        type=positive_int,
        metavar="N",
        help="with --proof: at most N rows in the answer (default: [server] query_max_rows)",
    )
    parser.add_argument(
        "--verify",
        metavar="FILE",
        help="check a saved answer with a proof, or the /verify body made of one (the answer "
        "without its output) ('-' reads stdin): its hashes and signature, "
        "then its output by re-executing the query here at the blocks it pins; "
        "exit 0 if it holds, 1 if a check failed",
    )
    parser.add_argument(
        "--remote",
        metavar="URL",
        help="run the query on the node at URL (its query API, with the token `odfd login` "
        "kept for it); with --verify: have that node re-execute the answer (its /verify)",
    )
    sql_server.add_arguments(parser)
    add_root_argument(parser)
    parser.set_defaults(func=_sql, forward=forward)


class _HelpAction(argparse._HelpAction):
    """``-h``: the help of ``odfd sql server`` after that word (parsed as QUERY before the
    option), else ``odfd sql``'s own."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if getattr(namespace, "query", None) == sql_server.WORD:
            parser = sql_server.help_parser()
        super().__call__(parser, namespace, values, option_string)


def _statements(args: argparse.Namespace) -> list[str] | None:
    """The statements to run (``None``: the interactive shell), after every argument check;
    stdin is read once (the result is kept on ``args``)."""
    if "statements" in args:  # set below, on the first call
        return list(args.statements) if args.statements is not None else None
    _check_not_server(args)
    # Every argument error comes before the workspace is opened or Spark starts.
    given = [q for q in (args.query, args.command) if q is not None]
    if len(given) + (args.script is not None) > 1:
        raise SqlArgumentError("give one of QUERY, -c QUERY and --script FILE")
    check_output_args(args.output, args.output_path)
    statements: list[str] | None = None
    if given:
        statements = [given[0]]
    elif args.script is not None:
        statements = split_statements(_read_script(args.script))
    elif not sys.stdin.isatty():
        statements = split_statements(sys.stdin.read())
    if statements is not None and not statements:
        raise SqlArgumentError(f"{args.script or 'stdin'}: holds no SQL statement")
    if statements is not None and len(statements) > 1 and args.output_path is not None:
        raise SqlArgumentError("--output-path takes the result of a single statement")
    _check_proof_args(args, statements)
    args.statements = statements
    return statements


def _check_not_server(args: argparse.Namespace) -> None:
    if args.address is not None or args.port is not None or args.livy:
        raise SqlArgumentError(
            f"--address, --port and --livy are options of `odfd sql {sql_server.WORD}`"
        )


def _request(args: argparse.Namespace, statements: list[str]) -> SqlRequest:
    path = None if args.output_path is None else str(args.output_path.absolute())
    return SqlRequest(
        tuple(statements),
        args.engine,
        args.output,
        path,
        args.as_of,
        proof=args.proof,
        limit=args.limit,
    )


def forward(args: argparse.Namespace) -> tuple[SqlRequest, Rendering] | str:
    """The request a daemon runs for this command line, or why it runs here."""
    if args.verify is not None:
        return "it checks a saved answer"
    statements = _statements(args)
    if statements is None:
        return "it opens an interactive shell"
    if args.remote is not None:
        return "another node answers it"
    return _request(args, statements), Rendering()


def _sql(args: argparse.Namespace) -> int:
    if args.query == sql_server.WORD:
        return sql_server.run(args, default_engine=DEFAULT_ENGINE)
    if args.verify is not None:
        return _verify(args)
    statements = _statements(args)
    if args.remote is not None:
        return _remote(args, statements)

    async def run(node: Node) -> int:
        from odfd.app.query import pinned_at
        from odfd.app.sql import run_statements

        if statements is not None:
            await run_statements(node, _request(args, statements), Printer())
            return 0
        block, time = await pinned_at(node, args.as_of)
        return await _shell(node, args, block, time)

    return run_in_node(args, run)


def _remote(args: argparse.Namespace, statements: list[str] | None) -> int:
    """``--remote URL``: each statement answered by that node's query API."""
    if statements is None:
        raise SqlArgumentError("--remote URL runs a query given as QUERY, -c, --script or stdin")
    if args.proof or args.as_of is not None or args.engine != DEFAULT_ENGINE:
        raise SqlArgumentError("--remote URL takes no --proof, --as-of or --engine")

    async def run(node: Node | None) -> int:
        from odfd.app.remote_query import query_remote
        from odfd.app.result_formats import write_result

        for statement in statements:
            write_result(
                await query_remote(node, args.remote, statement), args.output, args.output_path
            )
        return 0

    from odfd.app.remote_query import workspace_found

    if not workspace_found(args.root):  # no login kept here: asked as anyone
        import asyncio

        return asyncio.run(run(None))
    return run_in_node(args, run, check_storage=False)


class Printer:
    """Each statement's result on stdout."""

    def emit(self, event: Event) -> None:
        if isinstance(event, StatementResult):
            sys.stdout.write(event.text)
            sys.stdout.flush()


class Rendering:
    """What the daemon answers, printed as a local run prints it."""

    def event(self, data: dict[str, Any]) -> None:
        Printer().emit(event_from_json(data, EVENTS))

    def result(self, data: Any) -> int:
        return 0


async def _shell(
    node: Node, args: argparse.Namespace, block: Multihash | None, time: Timestamp | None
) -> int:
    """The interactive shell: a failed statement prints its error and the shell goes on."""
    import readline

    from odfd.app.query import query
    from odfd.app.result_formats import write_result
    from protocol.errors import OdfError

    history = history_file(node.root)
    with contextlib.suppress(OSError):
        readline.read_history_file(history)
    terminal.info("odfd SQL shell: end statements with ;  leave with \\q or Ctrl-D")
    try:
        for statement in shell_statements(input):
            try:
                table = await query(node, statement, engine=args.engine, block=block, time=time)
            except OdfError as err:
                terminal.error(str(err))
                continue
            write_result(table, args.output, None)
    finally:
        with contextlib.suppress(OSError):
            readline.write_history_file(history)
    return 0


def _check_proof_args(args: argparse.Namespace, statements: list[str] | None) -> None:
    if not args.proof:
        if args.limit is not None:
            raise SqlArgumentError("--limit goes with --proof (a query limits itself with LIMIT)")
        return
    if args.output != "json":
        raise SqlArgumentError("--proof prints the signed answer as JSON: add -o json")
    if statements is None or len(statements) != 1:
        raise SqlArgumentError("--proof answers a single query")
    if args.as_of is not None:
        raise SqlArgumentError(
            "--proof answers at the datasets' heads (the answer pins their blocks); drop --as-of"
        )


def _verify(args: argparse.Namespace) -> int:
    """``--verify FILE``: one line, ``OK`` or ``FAILED`` with the check that failed."""
    _check_not_server(args)
    given = [q for q in (args.query, args.command) if q is not None]
    if given or args.script is not None or args.proof or args.as_of is not None:
        raise SqlArgumentError("--verify FILE takes no query, --script, --proof or --as-of")
    source = "stdin" if args.verify == "-" else args.verify
    text = sys.stdin.buffer.read() if args.verify == "-" else _read_answer(Path(args.verify))

    async def run(node: Node) -> int:
        from odfd.app.answer_checks import AnswerCheckError, check_locally, check_remotely
        from odfd.app.remote_query import RemoteQueryError, query_api_url

        if args.remote is not None:
            try:
                base = query_api_url(args.remote)
            except RemoteQueryError as err:  # no verdict: exit 2, not a failed check's 1
                raise AnswerCheckError(str(err)) from None
            token = node.transport.token_for(base)
            check = await check_remotely(text, source, base, token=token)
        else:
            check = await check_locally(node, text, source)
        if check.failure is None:
            print(
                f"OK: {source}: signed by {check.signer}; its output matches the query "
                f"re-executed at the pinned blocks by {check.re_executed_by}"
            )
            return 0
        stage = (
            "the answer on its own"
            if check.re_executed_by is None
            else f"re-executed by {check.re_executed_by}"
        )
        print(f"FAILED: {source}: {stage}: {check.failure.line()}")
        return 1

    return run_in_node(args, run)


def _read_answer(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise SqlArgumentError(f"cannot read the answer {path}: {err.strerror}") from None


def _read_script(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise SqlArgumentError(f"cannot read the script {path}: {reason}") from None
