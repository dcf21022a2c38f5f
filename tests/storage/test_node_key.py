"""The node's identity key: created once with the workspace's other keys, private, stable, and
named by its did:key."""

from __future__ import annotations

import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from nacl.signing import SigningKey

from protocol.identity.signature import private_key_to_multibase
from storage.errors import StorageError
from storage.keys import NODE_KEY_FILE, KeyStore, did_of, load_signing_key


def test_created_once_private_and_stable(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys")
    assert keys.load_node_key() is None
    key = keys.node_key()
    path = tmp_path / "keys" / NODE_KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "keys").stat().st_mode) == 0o700
    assert path.read_bytes() == bytes(key)
    assert bytes(keys.node_key()) == bytes(key)
    assert bytes(KeyStore(tmp_path / "keys").load_node_key() or b"") == bytes(key)
    assert [entry.name for entry in (tmp_path / "keys").iterdir()] == [NODE_KEY_FILE]


def test_concurrent_creators_agree(tmp_path: Path) -> None:
    with ThreadPoolExecutor(8) as pool:
        keys = list(pool.map(lambda _: bytes(KeyStore(tmp_path / "keys").node_key()), range(16)))
    assert len(set(keys)) == 1
    assert [entry.name for entry in (tmp_path / "keys").iterdir()] == [NODE_KEY_FILE]


def test_did_key_of_the_node() -> None:
    """The reference's test key (seed of 32 bytes of 123) has this did:key."""
    key = SigningKey(bytes([123] * 32))
    assert str(did_of(key)) == "did:key:z6Mko2nqhQ9wYSTS5Giab2j1aHzGnxHimqwmFeEVY8aNsVnN"


def test_key_files_in_the_reference_text_form(tmp_path: Path) -> None:
    """A key named in the configuration may be the reference's multibase text (``u…``)."""
    seed = bytes(range(32))
    path = tmp_path / "identity.key"
    path.write_text(private_key_to_multibase(seed) + "\n")
    assert bytes(load_signing_key(path)) == seed


@pytest.mark.parametrize("content", [b"", b"short", b"u" + b"A" * 10, bytes(33)])
def test_bad_key_files_name_the_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "identity.key"
    path.write_bytes(content)
    with pytest.raises(StorageError, match="identity.key"):
        load_signing_key(path)
    with pytest.raises(StorageError, match="cannot read key file"):
        load_signing_key(tmp_path / "missing.key")
