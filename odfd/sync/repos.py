"""Named remote repositories (``odfd repo add NAME URL``) and writing ``NAME/dataset`` instead
of a URL wherever a remote is expected: ``odfd pull kamu-hub/com.example.trades``,
``odfd push trades kamu-hub``.

A name is expanded only when it is a configured repository and the text is not a URL, so local
``account/dataset`` aliases keep working (``pull`` looks the text up as a local dataset first).
"""

from __future__ import annotations

import re

from odfd.errors import OdfdError
from odfd.sync.transport import looks_like_url
from odfd.sync.transport.url import canonical_url
from storage.workspace import Workspace

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class RepoError(OdfdError):
    """A repository name or URL is invalid, unknown or already taken."""


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise RepoError(
            f"{name!r} is not a repository name (letters, digits, '.', '_' and '-'; no '/')"
        )
    return name


def check_url(url: str) -> str:
    if not looks_like_url(url):
        raise RepoError(f"{url!r} is not a URL (http(s)://, file://, ipfs://, ipns://, s3://)")
    canonical_url(url)
    return url


def join(base: str, path: str) -> str:
    return base.rstrip("/") + "/" + path.lstrip("/")


async def expand(workspace: Workspace, text: str) -> str:
    """``NAME`` or ``NAME/path`` of a configured repository as a URL; anything else unchanged."""
    if looks_like_url(text):
        return text
    name, _, rest = text.partition("/")
    base = await workspace.catalog.get_remote(name)
    if base is None:
        return text
    return join(base, rest) if rest else base
