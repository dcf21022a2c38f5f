"""``odfd login URL``: log in to a remote node and keep its token for pull, push, search and
``sql --remote`` against it (``odfd.app.remote_login``); ``--check`` asks the node whom the kept
token speaks for, ``--list`` shows the kept logins. The password is read from a prompt or, with
``--password-stdin``, from standard input; a token with ``--token-stdin`` (``--token`` on the
command line is visible to ``ps``). Neither is ever printed."""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import TYPE_CHECKING

from odfd.cli import terminal
from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "login",
        help="log in to a remote node and keep its access token for pull, push, search, sql",
        description="Logs in to the odfd (or kamu) node at URL with an account's password, or "
        "with an access token it issued, and keeps the token (mode 0600) in this workspace's "
        "logins.json, or with --global in ~/.config/odfd/logins.json. Pull, push, search and "
        "`sql --remote` then send it to that node, and only to it.",
    )
    parser.add_argument("url", nargs="?", metavar="URL", help="the node, e.g. http://host:8080/")
    parser.add_argument(
        "-u", "--user", "--login", dest="login", metavar="NAME", help="account name (else asked)"
    )
    parser.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input"
    )
    parser.add_argument(
        "--token", "--access-token", dest="token", help="keep this token instead of a password"
    )
    parser.add_argument(
        "--token-stdin", action="store_true", help="read the token from standard input"
    )
    parser.add_argument(
        "--browser",
        action="store_true",
        help="sign in on the node's web page instead (its device login, as `kamu login` does): "
        "prints the page's URL, then waits for the sign-in there",
    )
    parser.add_argument(
        "--global",
        dest="user_scope",
        action="store_true",
        help="keep the token for every workspace of this user (~/.config/odfd/logins.json)",
    )
    parser.add_argument(
        "--check", action="store_true", help="ask the node whom the kept token speaks for"
    )
    parser.add_argument("--list", action="store_true", help="show the kept logins (no tokens)")
    add_root_argument(parser)
    parser.set_defaults(func=_login)


def _login(args: argparse.Namespace) -> int:
    if args.browser and (args.login or args.password_stdin or args.token or args.token_stdin):
        raise SystemExit("odfd login: --browser signs in on the node's page: no name or token")
    if args.list:
        return run_in_node(args, _list, check_storage=False)
    if args.url is None:
        raise SystemExit("odfd login: give the node's URL (or --list)")
    if args.check:
        return run_in_node(args, lambda node: _check(node, args.url), check_storage=False)
    import asyncio

    from odfd.app.remote_login import check_reachable

    # A URL no login can go to, or a node that does not answer, is said before a password is asked.
    asyncio.run(check_reachable(args.url))
    login, password, token = (None, None, None) if args.browser else _credentials(args)

    async def run(node: Node) -> int:
        from odfd.app.login_store import Scope
        from odfd.app.remote_device_login import device_token
        from odfd.app.remote_login import log_in, login_url

        scope = Scope.USER if args.user_scope else Scope.WORKSPACE
        given = token
        if args.browser:
            given = await device_token(login_url(args.url), _show_sign_in_page)
        done = await log_in(
            node, args.url, login=login, password=password, token=given, scope=scope
        )
        terminal.info(f"Logged in: {done.account} at {done.url} ({scope.value} store)")
        return 0

    return run_in_node(args, run, check_storage=False)


def _show_sign_in_page(url: str) -> None:
    print(f"Open this page in a browser and sign in there: {url}", file=sys.stderr, flush=True)


def _credentials(args: argparse.Namespace) -> tuple[str | None, str | None, str | None]:
    if args.token_stdin or args.token is not None:
        if args.login is not None or args.password_stdin:
            raise SystemExit("odfd login: a token or a name and password, not both")
        token = sys.stdin.readline().strip() if args.token_stdin else args.token.strip()
        if not token:
            raise SystemExit("odfd login: the token is empty")
        return None, None, token
    login = args.login
    if login is None:
        if args.password_stdin or not sys.stdin.isatty():
            raise SystemExit("odfd login: give the account name (--user NAME)")
        login = input(f"Account [{getpass.getuser()}]: ").strip() or getpass.getuser()
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    elif sys.stdin.isatty():
        password = getpass.getpass(f"Password of {login}: ")
    else:
        raise SystemExit("odfd login: no terminal to ask the password on: use --password-stdin")
    if not password:
        raise SystemExit("odfd login: the password is empty")
    return login, password, None


async def _check(node: Node, url: str) -> int:
    from odfd.app.remote_login import check

    found = await check(node, url)
    print(f"{found.account} at {found.url} (token valid; {found.scope.value} store)")
    return 0


async def _list(node: Node) -> int:
    from odfd.app.remote_login import logins

    for each in logins(node):
        print(f"{each.url}\t{each.account}\t{each.scope.value}\t{each.saved_at}")
    return 0
