"""``odfd secrets key|encrypt``: the node's public encryption key, and secrets encrypted to it.

A publisher keeps a secret out of manifests (and the repositories and chains they end up in) by
putting only its JWE there: ``odfd secrets key`` on the node prints the key, ``odfd secrets
encrypt --key FILE`` on any machine turns a value read from standard input into the JWE, to use
as ``{value: <JWE>, contentEncoding: jwe}`` in a ``SecretSet`` or ``WebhookTarget``.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from odfd.cli.workspace_args import add_root_argument, run_in_node

if TYPE_CHECKING:
    from odfd.app.node import Node


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "secrets", help="the node's public key, and secrets encrypted to it for manifests"
    )
    actions = parser.add_subparsers(dest="secrets_command", metavar="ACTION", required=True)

    key = actions.add_parser(
        "key", help="print this node's public encryption key (a JWK) to share with publishers"
    )
    add_root_argument(key)
    key.set_defaults(func=_key)

    encrypt = actions.add_parser(
        "encrypt",
        help="read a secret from standard input and print it as a JWE for a manifest",
    )
    encrypt.add_argument(
        "--key",
        dest="key_file",
        type=Path,
        metavar="FILE",
        help="the node's public key as `odfd secrets key` printed it (default: this workspace's "
        "node; no workspace is needed with --key)",
    )
    add_root_argument(encrypt)
    encrypt.set_defaults(func=_encrypt)


def _key(args: argparse.Namespace) -> int:
    async def run(node: Node) -> int:
        from odfd.app.node_secrets import node_secrets

        print(json.dumps(node_secrets(node.keys).public_jwk(), sort_keys=True))
        return 0

    return run_in_node(args, run, check_storage=False)


def _encrypt(args: argparse.Namespace) -> int:
    from odfd.app.node_secrets import SecretError, encrypt_to, node_secrets

    public = _read_key(args.key_file) if args.key_file is not None else None
    plain = _read_secret()
    if public is None:

        async def own(node: Node) -> dict[str, Any]:
            return node_secrets(node.keys).public_jwk()

        public = run_in_node(args, own, check_storage=False)
    try:
        print(encrypt_to(public, plain))
    except SecretError as err:
        where = args.key_file or "this node's key"
        raise SystemExit(f"odfd secrets encrypt: {where}: {err}") from None
    return 0


def _read_key(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as err:
        raise SystemExit(f"odfd secrets encrypt: cannot read {path}: {err.strerror}") from None
    except ValueError as err:
        raise SystemExit(f"odfd secrets encrypt: {path} is not JSON: {err}") from None


def _read_secret() -> str:
    """From a terminal without echo, else standard input less one trailing newline (``echo``
    and here-strings add one)."""
    if sys.stdin.isatty():
        plain = getpass.getpass("Secret: ")
    else:
        plain = sys.stdin.read()
        plain = plain[:-1] if plain.endswith("\n") else plain
    if not plain:
        raise SystemExit("odfd secrets encrypt: the secret is empty")
    return plain
