"""The storage interfaces every backend implements: objects by hash, refs with CAS, named files."""

from storage.stores.base import NamedStore, ObjectStore, RefStore

__all__ = ["NamedStore", "ObjectStore", "RefStore"]
