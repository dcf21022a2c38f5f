"""Identities: multihashes, dataset DIDs, and dataset names, aliases, references and patterns.

Import from here; the modules behind it are an implementation detail. The patterns load on first
use (only the node's configuration and name matching need them; every command's start-up would pay
for their classes and regular expressions).
"""

from typing import TYPE_CHECKING, Any

from protocol.identity.did import DatasetId, DidKey
from protocol.identity.multibase import Multibase
from protocol.identity.multicodec import Multicodec
from protocol.identity.multihash import Multihash
from protocol.identity.names import (
    AccountName,
    AccountOrRepoName,
    DatasetAlias,
    DatasetAliasRemote,
    DatasetName,
    RepoName,
)
from protocol.identity.refs import (
    DatasetAliasAmbiguous,
    DatasetIdRemote,
    DatasetRef,
    DatasetRefAny,
    DatasetRefRemote,
    DatasetUrl,
    IsRepo,
)
from protocol.identity.signature import Signature

if TYPE_CHECKING:
    from protocol.identity.patterns import (
        DatasetAliasPattern,
        DatasetNamePattern,
        DatasetPatternAmbiguous,
        DatasetPatternRemote,
        DatasetPushTarget,
        DatasetRefAnyPattern,
        DatasetRefPattern,
    )

_PATTERNS = frozenset(
    {
        "DatasetAliasPattern",
        "DatasetNamePattern",
        "DatasetPatternAmbiguous",
        "DatasetPatternRemote",
        "DatasetPushTarget",
        "DatasetRefAnyPattern",
        "DatasetRefPattern",
    }
)


def __getattr__(name: str) -> Any:
    if name in _PATTERNS:
        from protocol.identity import patterns

        globals().update({n: getattr(patterns, n) for n in _PATTERNS})
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "AccountName",
    "AccountOrRepoName",
    "DatasetAlias",
    "DatasetAliasAmbiguous",
    "DatasetAliasPattern",
    "DatasetAliasRemote",
    "DatasetId",
    "DatasetIdRemote",
    "DatasetName",
    "DatasetNamePattern",
    "DatasetPatternAmbiguous",
    "DatasetPatternRemote",
    "DatasetPushTarget",
    "DatasetRef",
    "DatasetRefAny",
    "DatasetRefAnyPattern",
    "DatasetRefPattern",
    "DatasetRefRemote",
    "DatasetUrl",
    "DidKey",
    "IsRepo",
    "Multibase",
    "Multicodec",
    "Multihash",
    "RepoName",
    "Signature",
]
