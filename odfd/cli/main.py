"""Entry point of the ``odfd`` command: builds the parser and runs one command.

Only the module of the command being run is imported (with what it needs): ``odfd --help`` and
light commands such as ``list`` or ``log`` must not pay for Spark, aiohttp or the daemon. The other
commands appear in the parser by name and summary alone (:data:`COMMANDS`; a test keeps each
summary equal to its module's own ``help``).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
import warnings
from collections.abc import Sequence

from odfd.app.failures import describe_failure
from odfd.app.forwarding import FORWARDED, serves_here
from odfd.cli import global_options, terminal
from odfd.cli.workspace_args import add_root_argument

#: Command name -> (module under ``odfd.cli.commands`` exposing ``register(subparsers)``, summary).
#: A command's handler is stored as ``func`` on its parser and returns the exit code.
COMMANDS: dict[str, tuple[str, str]] = {
    "block": ("block", "hash, encode and decode metadata blocks"),
    "data": ("data", "inspect data files"),
    "init": ("init", "create a workspace (config, catalog, datasets folder)"),
    "add": ("add", "create datasets from DatasetSnapshot manifests"),
    "list": ("list", "list the datasets in the workspace"),
    "log": ("log", "show a dataset's metadata blocks, newest first"),
    "delete": ("delete", "delete datasets (folder, key and catalog entry) or resources"),
    "rename": ("rename", "rename a dataset"),
    "import": (
        "import_",
        "copy an existing dataset folder into the workspace after validating its chain",
    ),
    "repair": ("repair", "rebuild the catalog from the dataset folders"),
    "pull": ("pull", "update datasets from their sources (ingest or transform)"),
    "ingest": ("ingest", "push data from files into a root dataset"),
    "tail": ("tail", "show the last records of a dataset"),
    "sql": (
        "sql",
        "query datasets with SQL (DataFusion, or Spark with --engine spark); a shell when no query is given",
    ),
    "serve": ("serve", "serve this node's datasets over HTTP"),
    "push": ("push", "publish datasets to a remote (http(s)://, file://, ipns://)"),
    "verify": (
        "verify",
        "audit datasets: metadata integrity, data integrity, reproducibility of transforms",
    ),
    "daemon": ("daemon", "run the node: serve datasets, sync mirrors, audit, reconcile resources"),
    "mirror": ("mirror", "keep datasets in sync with remote sources"),
    "apply": (
        "apply",
        "create or update resources from manifests (Dataset, Source, SecretSet, ...)",
    ),
    "get": ("get", "show resources and their status"),
    "status": ("status", "datasets, mirrors, syncs and audits of this node"),
    "engine": ("engine", "which engine commands use (local JVM or Spark Connect) and why"),
    "system": ("system", "housekeeping: gc, diagnose, info"),
    "config": ("config", "show and change settings (config.toml)"),
    "completions": (
        "completions",
        'print a shell completion script (bash: eval "$(odfd completions bash)")',
    ),
    "repo": ("repo", "named remote repositories and dataset aliases"),
    "account": ("account", "accounts on this node and their access tokens"),
    "access": ("access", "who can read, write, maintain and administer a dataset, and why"),
    "login": (
        "login",
        "log in to a remote node and keep its access token for pull, push, search, sql",
    ),
    "logout": ("logout", "forget the access token kept for a remote node"),
    "secrets": ("secrets", "the node's public key, and secrets encrypted to it for manifests"),
    "reset": ("reset", "move a dataset's head back to an earlier block (asks first)"),
    "compact": (
        "compact",
        "merge small data slices into fewer files (rewrites history; asks first)",
    ),
    "new": ("new", "write a manifest template for a new dataset"),
    "search": ("search", "find datasets by name here and on the named repositories"),
    "inspect": ("inspect", "lineage, schema and queries of a dataset"),
    "ui": ("ui", "open the web console of this node"),
    "provenance": (
        "provenance",
        "trace rows of a derivative dataset back to the input rows and ingests they came from",
    ),
}


#: Environment variable that turns on ``-v`` (tracebacks and engine detail on errors).
VERBOSE_ENV = "ODFD_VERBOSE"

#: ``odfd.config.ENV_PREFIX``, known here without importing the configuration module.
ENV_PREFIX = "ODFD_"


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with ``command`` (default: every command) registered in full."""
    parser = argparse.ArgumentParser(
        prog="odfd",
        description="Open Data Fabric node: publish, mirror, replicate and audit datasets.",
    )
    parser.add_argument("--version", action=_VersionAction)
    global_options.add_to(parser, top_level=True)
    add_root_argument(parser, top_level=True)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    stand_ins: set[str] = set()
    for name, (module_name, summary) in COMMANDS.items():
        if command is None or name == command:
            module = importlib.import_module(f"odfd.cli.commands.{module_name}")
            module.register(subparsers)
        else:
            subparsers.add_parser(name, help=summary, add_help=False)
            stand_ins.add(name)
    global_options.add_to_subcommands(subparsers, skip=stand_ins)
    describe_commands(subparsers)
    return parser


def describe_commands(subparsers: argparse._SubParsersAction) -> None:
    """Gives each command without a description of its own its summary as one, so that
    ``odfd COMMAND --help`` says what the command does, not only its usage (argparse shows a
    command's ``help`` only in its parent's list)."""
    summaries = {choice.dest: choice.help for choice in subparsers._choices_actions}
    for name, parser in subparsers.choices.items():
        if parser.description is None:
            parser.description = summaries.get(name)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                describe_commands(action)


def _command_in(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs (its first word after the top-level options), if it is one."""
    words = iter(argv)
    for word in words:
        if word == "--root":
            next(words, None)  # its value is not the command
        elif not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Runs ``odfd ARGV``. An engine command goes to the workspace's daemon when one runs it
    (``odfd.cli.via_daemon``): parsed here into its request, run there, rendered here."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = _command_in(argv)
    parser = build_parser(command) if command is not None else build_parser("")
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _refuse_unknown(parser, args, unknown, command)
    verbose = args.verbose or os.environ.get(VERBOSE_ENV, "") not in ("", "0")
    terminal.configure(quiet=args.quiet, verbose=verbose, no_color=args.no_color)
    _warn_unknown_environment()
    try:
        if command in FORWARDED and not serves_here(command, argv):
            from odfd.cli import via_daemon

            code = via_daemon.run(args, argv, verbose=verbose)
            if code is not None:
                return code
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 141
    except Exception as err:
        message, code = describe_failure(err)
        if message is None:
            raise  # a bug: its traceback
        if verbose:
            import traceback

            traceback.print_exception(err, file=sys.stderr)
        terminal.error(message)
        return code


def _refuse_unknown(
    parser: argparse.ArgumentParser,
    args: argparse.Namespace,
    unknown: list[str],
    command_name: str | None,
) -> None:
    """Exits with argparse's error for arguments no parser took, said by the command that was
    run (its usage, ``odfd tail: error: …``) rather than by ``odfd`` itself, with the option the
    first one most likely meant."""
    import difflib

    command = _command_parser(parser, args, command_name)
    options = [name for action in command._actions for name in action.option_strings]
    message = f"unrecognized arguments: {' '.join(unknown)}"
    first = unknown[0].split("=", 1)[0]
    close = difflib.get_close_matches(first, options, n=1, cutoff=0.8) if first[:1] == "-" else []
    if close:
        message += f" (did you mean {close[0]}?)"
    command.error(f"{message}; `{command.prog} --help` lists its options")


def _command_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace, name: str | None
) -> argparse.ArgumentParser:
    """The parser of the (sub)command that was run: ``odfd repo add``'s, not ``odfd``'s
    (``name`` is the word chosen at this level; below it, the word ``args`` holds)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(name or "")
            if chosen is None:
                return parser
            below = next(
                (
                    getattr(args, sub.dest, None)
                    for sub in chosen._actions
                    if isinstance(sub, argparse._SubParsersAction)
                ),
                None,
            )
            return _command_parser(chosen, args, below)
    return parser


def _warn_unknown_environment() -> None:
    """Warns of ``ODFD_*`` variables odfd does not read. Only when one is set is the
    configuration module imported (~0.06 s of CPU: its settings' modules), which a command that
    needs no configuration, such as ``odfd data hash``, would otherwise pay for."""
    if not any(name.startswith(ENV_PREFIX) for name in os.environ):
        return
    from odfd.config import unknown_environment

    for name, guess in unknown_environment():
        terminal.warn(
            f"ignoring unknown environment variable {name}"
            + (f" (did you mean {guess}?)" if guess else "")
        )


def quiet_dependency_warnings() -> None:
    """Process-wide warning policy of the `odfd` program (a library import never sets one).

    ipfshttpclient passes urllib3 2.x a `strict` argument it no longer needs, and urllib3 warns
    about it on every connection; the warning says nothing to an odfd user.
    """
    warnings.filterwarnings(
        "ignore",
        message="The 'strict' parameter is no longer needed",
        category=FutureWarning,
        module="urllib3.poolmanager",
    )


ARROW_MEMORY_POOL = "jemalloc"
"""Arrow's allocator in the `odfd` program, unless ``ARROW_DEFAULT_MEMORY_POOL`` names another.

Arrow's default, mimalloc, hands freed pages back to the system 10 ms after a batch is freed and
takes fresh (2 MiB, zeroed) pages for the next one: a data audit (each batch decoded on one
thread, freed on another once hashed) spent 5% of its CPU zeroing them (``clear_page`` in a
profile of ``scripts/bench_verify.py``'s 2-job run), which jemalloc's reuse does not pay (its
peak memory was 12% lower too)."""


def prefer_arrow_memory_pool() -> None:
    """Selects :data:`ARROW_MEMORY_POOL` for the process; Arrow reads the variable at its first
    allocation, so this runs before anything is decoded (the command modules import Arrow).
    Only on Linux, where pyarrow's wheels always include jemalloc (elsewhere an Arrow without it
    would warn on every command)."""
    if sys.platform.startswith("linux"):
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", ARROW_MEMORY_POOL)


def run() -> int:
    """The `odfd` program: its allocator and warning policy, then the command, then a quick
    exit."""
    prefer_arrow_memory_pool()
    quiet_dependency_warnings()
    code = main()
    freeze_for_exit()
    return code


def freeze_for_exit() -> None:
    """Lets the interpreter's exit skip walking every object still alive.

    While it frees the modules, the exiting interpreter walks all objects in cycles again and
    again; after an engine command that is some 100,000 (pandas, Arrow, DataFusion, PySpark),
    and the walks cost a short command about as much as its own work (~0.15 s of a small
    DataFusion pull). The garbage there is now is collected (its finalizers run, as at any
    exit); what is still alive is frozen, so the exit leaves it to the operating system. Only
    the ``odfd`` program does this, right before it ends; never a process that goes on.
    """
    gc.collect()
    gc.freeze()


class _VersionAction(argparse.Action):
    """``--version``, reading the installed version only when asked (importlib.metadata costs
    0.1 s of start-up that every other command would pay)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version"
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from importlib import metadata

        try:
            version = metadata.version("odfd")
        except metadata.PackageNotFoundError:
            version = "unknown"
        sys.stdout.write(f"odfd {version}\n")
        parser.exit()


if __name__ == "__main__":
    sys.exit(run())
