"""Where a server reads an object of a dataset it serves (the Simple Transfer Protocol's GETs of
blocks, data slices and checkpoints): a file it sends as it is, byte ranges and all, or, for a
dataset in a bucket, the store it streams the object from."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

from protocol.transfer.simple import ObjectKind
from storage.dataset_storage import LocalFiles
from storage.stores.localfs import LocalFsObjectStore

if TYPE_CHECKING:
    from protocol.identity import Multihash
    from storage.dataset import Dataset
    from storage.stores.base import ObjectStore


async def object_source(dataset: Dataset, kind: ObjectKind, hash: Multihash) -> Path | ObjectStore:
    """The object's file: a local folder's (possibly missing: opening it says so), or the node's
    cached copy of a bucket's object; else the store to stream it from."""
    match kind:
        case ObjectKind.BLOCK:
            store = dataset.blocks
        case ObjectKind.DATA:
            store = dataset.data
        case ObjectKind.CHECKPOINT:
            store = dataset.checkpoints
    if isinstance(store, LocalFsObjectStore):
        return store.path_of(hash)
    if isinstance(store, LocalFiles) and await asyncio.to_thread(store.path_of(hash).is_file):
        return store.path_of(hash)  # in the node's cache
    return store
