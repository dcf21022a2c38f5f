"""``odfd account``: accounts on this node and their access tokens.

Passwords are read from a prompt or, with ``--password-stdin``, from the first line of standard
input, never from the command line (where ``ps`` and shell history would show them)."""

from __future__ import annotations

import argparse
import getpass
import sys
from datetime import timedelta
from typing import TYPE_CHECKING

from odfd.cli import terminal
from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("account", help="accounts on this node and their access tokens")
    commands = parser.add_subparsers(dest="account_command", metavar="COMMAND", required=True)

    add = commands.add_parser("add", help="create an account")
    add.add_argument("name", help="the account name")
    add.add_argument("--display-name", help="the name shown for it (default: NAME)")
    add.add_argument("--email", help="shown by /accounts/me")
    add.add_argument("--avatar-url", help="shown by /accounts/me")
    add.add_argument("--admin", action="store_true", help="may administer the node")
    add.add_argument("--no-password", action="store_true", help="token-only account")
    _password_option(add)
    add.set_defaults(func=_add)

    listing = commands.add_parser("list", help="list accounts")
    listing.set_defaults(func=_list)

    passwd = commands.add_parser("passwd", help="set an account's password")
    passwd.add_argument("name", help="the account")
    _password_option(passwd)
    passwd.set_defaults(func=_passwd)

    remove = commands.add_parser("remove", help="delete an account and its tokens")
    remove.add_argument("name", help="the account")
    remove.set_defaults(func=_remove)

    token = commands.add_parser("token", help="access tokens of an account")
    tokens = token.add_subparsers(dest="token_command", metavar="COMMAND", required=True)
    create = tokens.add_parser("create", help="issue a token (printed once)")
    create.add_argument("name", help="the account the token acts as")
    create.add_argument("--label", default="", help="a note to tell tokens apart")
    create.add_argument("--expires-in-days", type=float, help="default: never expires")
    create.set_defaults(func=_token_create)
    token_list = tokens.add_parser("list", help="list an account's tokens")
    token_list.add_argument("name", help="the account")
    token_list.set_defaults(func=_token_list)
    revoke = tokens.add_parser("revoke", help="revoke a token by its id")
    revoke.add_argument("name", help="the account")
    revoke.add_argument("token_id", help="as `odfd account token list` shows it")
    revoke.set_defaults(func=_token_revoke)

    for sub in (add, listing, passwd, remove, create, token_list, revoke):
        add_root_argument(sub)


def _password_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input"
    )


def _read_password(args: argparse.Namespace) -> str:
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass("Password: ")
        if getpass.getpass("Password again: ") != password:
            raise SystemExit("odfd: the passwords differ")
    if not password:
        raise SystemExit("odfd: the password is empty")
    return password


def _add(args: argparse.Namespace) -> int:
    password = None if args.no_password else _read_password(args)

    async def run(node: Node) -> int:
        from odfd.app.accounts import add_account

        record = await add_account(
            node,
            args.name,
            password=password,
            display_name=args.display_name,
            email=args.email,
            avatar_url=args.avatar_url,
            is_admin=args.admin,
        )
        terminal.info(f"Added account {record.name} ({record.id})")
        return 0

    return run_in_node(args, run)


def _list(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        from odfd.app.accounts import list_accounts

        for record in await list_accounts(node):
            flags = " admin" if record.is_admin else ""
            email = f" <{record.email}>" if record.email else ""
            print(f"{record.name}\t{record.display_name}{email}\t{record.id}{flags}")
        return 0

    return run_in_node(args, run)


def _passwd(args: argparse.Namespace) -> int:
    password = _read_password(args)

    async def run(node: Node) -> int:
        from odfd.app.accounts import set_password

        await set_password(node, args.name, password)
        terminal.info(f"Password of {args.name} changed")
        return 0

    return run_in_node(args, run)


def _remove(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        from odfd.app.accounts import remove_account

        await remove_account(node, args.name)
        terminal.info(f"Removed account {args.name}")
        return 0

    return run_in_node(args, run)


def _token_create(args: argparse.Namespace) -> int:
    lifetime = None if args.expires_in_days is None else timedelta(days=args.expires_in_days)

    async def run(node: Node) -> int:
        from odfd.app.accounts import create_token

        issued = await create_token(node, args.name, label=args.label, lifetime=lifetime)
        terminal.info(f"Token {issued.record.id} for {issued.record.account} (shown only once):")
        print(issued.secret)
        return 0

    return run_in_node(args, run)


def _token_list(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        from odfd.app.accounts import list_tokens

        for record in await list_tokens(node, args.name):
            expires = record.expires_at.isoformat() if record.expires_at else "never"
            state = f"revoked {record.revoked_at.isoformat()}" if record.revoked_at else "live"
            print(f"{record.id}\t{record.label}\texpires {expires}\t{state}")
        return 0

    return run_in_node(args, run)


def _token_revoke(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        from odfd.app.accounts import revoke_token

        await revoke_token(node, args.name, args.token_id)
        terminal.info(f"Revoked token {args.token_id}")
        return 0

    return run_in_node(args, run)
