"""Where ``odfd login`` keeps the access tokens it was given, one per remote node.

Two stores, as the reference keeps two: the workspace's ``logins.json`` (beside ``config.toml``)
and the user's ``$XDG_CONFIG_HOME/odfd/logins.json`` (``~/.config/odfd/``) for every workspace of
that user (``odfd login --global``). Both are written atomically with mode 0600 and hold only
what a token needs: the node's URL, the account it speaks for and the token. A token is scoped
to the node that issued it: it is sent only to URLs under that node's URL (scheme, host and
port, then path), never to another host or port."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from odfd.errors import OdfdError
from storage.atomic import write_file_atomic

STORE_NAME = "logins.json"
STORE_VERSION = 1
SECRET_MODE = 0o600


class LoginStoreError(OdfdError):
    """A store that cannot be read or written, or a URL that cannot be logged in to."""


class Scope(Enum):
    WORKSPACE = "workspace"
    USER = "user"


@dataclass(frozen=True, slots=True)
class StoredLogin:
    url: str
    """The node's URL, normalised by ``odfd.sync.transport.url.node_url``."""
    account: str
    token: str
    saved_at: str


def user_store_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "odfd" / STORE_NAME


def store_path(workspace_root: Path, scope: Scope) -> Path:
    return workspace_root / STORE_NAME if scope is Scope.WORKSPACE else user_store_path()


def read_logins(path: Path) -> list[StoredLogin]:
    """The logins in the store at ``path`` (none when it does not exist)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as err:
        raise LoginStoreError(f"{path}: cannot read the login store: {err}") from None
    try:
        if document["version"] != STORE_VERSION:
            raise LoginStoreError(f"{path}: unknown login store version {document['version']!r}")
        return [
            StoredLogin(str(e["url"]), str(e["account"]), str(e["token"]), str(e["savedAt"]))
            for e in document["logins"]
        ]
    except (KeyError, TypeError) as err:
        raise LoginStoreError(f"{path}: malformed login store (missing {err})") from None


def write_logins(path: Path, logins: list[StoredLogin]) -> None:
    """Replaces the store at ``path`` (mode 0600, its folder made if needed; an empty store is
    removed)."""
    if not logins:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    entries = [
        {"url": e.url, "account": e.account, "token": e.token, "savedAt": e.saved_at}
        for e in sorted(logins, key=lambda e: e.url)
    ]
    data = json.dumps({"version": STORE_VERSION, "logins": entries}, indent=2) + "\n"
    write_file_atomic(path, data.encode(), mode=SECRET_MODE)


def tokens_by_url(workspace_root: Path) -> Mapping[str, str]:
    """Node URL -> token from both stores, the workspace's winning over the user's; a store
    that cannot be read is left out (``odfd login --list`` reports it)."""
    tokens: dict[str, str] = {}
    for scope in (Scope.USER, Scope.WORKSPACE):
        try:
            tokens.update({e.url: e.token for e in read_logins(store_path(workspace_root, scope))})
        except LoginStoreError:
            continue
    return tokens
