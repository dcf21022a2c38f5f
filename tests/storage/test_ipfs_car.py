"""Reading raw blocks out of a CAR v1 stream (``storage.ipfs_car``), on streams built here from
the specification's layout, cut into arbitrary chunks as a network delivers them."""

from __future__ import annotations

import pytest
from multiformats import CID, multihash, varint

from storage.ipfs_car import CarFormatError, raw_blocks

_HEADER = b"\xa2eroots\x80gversion\x01"  # dag-cbor {"roots": [], "version": 1}


def _section(cid: CID, data: bytes) -> bytes:
    body = bytes(cid) + data
    return varint.encode(len(body)) + body


def _raw(data: bytes) -> CID:
    return CID("base32", 1, "raw", multihash.digest(data, "sha2-256"))


def _car(*sections: bytes) -> bytes:
    return varint.encode(len(_HEADER)) + _HEADER + b"".join(sections)


def _chunks(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("chunk", [1, 7, 1 << 20])
def test_raw_blocks_are_read_and_others_skipped(chunk: int) -> None:
    first, second = b"block one" * 50, b"block two"
    folder = CID("base58btc", 0, "dag-pb", multihash.digest(b"a folder node", "sha2-256"))
    dag = CID("base32", 1, "dag-pb", multihash.digest(b"a file node", "sha2-256"))
    car = _car(
        _section(folder, b"a folder node"),
        _section(_raw(first), first),
        _section(dag, b"a file node"),
        _section(_raw(second), second),
    )
    found = dict(raw_blocks(_chunks(car, chunk), max_bytes=1 << 20))
    assert found == {bytes(_raw(first)): first, bytes(_raw(second)): second}


def test_blocks_beyond_the_limit_are_left_out() -> None:
    blocks = [bytes([n]) * 100 for n in range(5)]
    car = _car(*(_section(_raw(b), b) for b in blocks))
    assert [data for _, data in raw_blocks([car], max_bytes=250)] == blocks[:2]


@pytest.mark.parametrize("cut", [1, 3, 20])
def test_a_truncated_stream_is_an_error(cut: int) -> None:
    car = _car(_section(_raw(b"x" * 30), b"x" * 30))
    with pytest.raises(CarFormatError):
        list(raw_blocks([car[:-cut]], max_bytes=1 << 20))


def test_an_empty_stream_is_an_error() -> None:
    with pytest.raises(CarFormatError, match="empty"):
        list(raw_blocks([], max_bytes=1))


def _dag_pb(unixfs_type: int, links: bytes = b"") -> tuple[CID, bytes]:
    """A dag-pb node (its links, then PBNode.Data holding UnixFS Data.Type) and its CIDv1."""
    node = links + b"\x0a\x02\x08" + bytes([unixfs_type])
    return CID("base32", 1, "dag-pb", multihash.digest(node, "sha2-256")), node


@pytest.mark.parametrize("stop", [False, True])
def test_an_export_can_stop_at_the_first_file_node(stop: bool) -> None:
    """Folder nodes (Directory, HAMTShard) are passed over; a file node (a file of several
    chunks) ends the read when asked, so its chunks and what follows are not moved."""
    before, chunk, after = b"whole file", b"chunk of a big file", b"file after"
    link = b"\x12\x03\x0a\x01\x00"  # a PBLink with a (bogus) hash: skipped as a field
    car = _car(
        _section(*_dag_pb(1, link)),
        _section(*_dag_pb(5)),
        _section(_raw(before), before),
        _section(*_dag_pb(2)),
        _section(_raw(chunk), chunk),
        _section(_raw(after), after),
    )
    found = [data for _, data in raw_blocks([car], max_bytes=1 << 20, stop_at_file_node=stop)]
    assert found == ([before] if stop else [before, chunk, after])


def test_a_malformed_dag_pb_node_is_an_error_when_it_decides_the_stop() -> None:
    bogus = b"\x08\x01"  # a varint field: no PBNode has one
    cid = CID("base32", 1, "dag-pb", multihash.digest(bogus, "sha2-256"))
    with pytest.raises(CarFormatError, match="wire type 0"):
        list(raw_blocks([_car(_section(cid, bogus))], max_bytes=1 << 20, stop_at_file_node=True))
