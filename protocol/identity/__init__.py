"""Identities: multihashes, dataset DIDs, and dataset names, aliases, references and patterns.

Import from here; the modules behind it are an implementation detail.
"""

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
from protocol.identity.patterns import (
    DatasetAliasPattern,
    DatasetNamePattern,
    DatasetPatternAmbiguous,
    DatasetPatternRemote,
    DatasetPushTarget,
    DatasetRefAnyPattern,
    DatasetRefPattern,
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
]
