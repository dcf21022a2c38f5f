"""Parsing what Kubo and js-ipfs print: CIDs in any base, IPNS names in either form, API addresses.

No node needed. The IPNS vector (a peer id and its `k51…` form) was printed by js-ipfs 0.66.1.
"""

from __future__ import annotations

import pytest
from multiformats import CID, multihash

from protocol.errors import ParseError
from protocol.identity import DatasetId
from storage.ipfs_client import IpnsName, api_multiaddr, parse_cid
from storage.ipns_name import ipns_name_of

PEER_ID = "12D3KooWQgft4wjwbFUjYbYBLxgAJxBNV25dtdXGVPDy1wZc32sj"
PEER_ID_AS_CID = "k51qzi5uqu5dlosmrhdr8tu8pt9tase6gwavao8buoxh8fawjdbpzh0dgnyheq"


def test_peer_id_and_libp2p_key_cid_are_the_same_name() -> None:
    by_peer_id = IpnsName.parse(PEER_ID)
    by_cid = IpnsName.parse(f"/ipns/{PEER_ID_AS_CID}")
    assert by_peer_id == by_cid
    assert hash(by_peer_id) == hash(by_cid)
    assert str(by_peer_id) == PEER_ID_AS_CID
    assert by_cid.peer_id == PEER_ID


@pytest.mark.parametrize("key", [bytes(32), bytes(range(32)), b"\xff" * 32])
def test_a_dataset_name_prints_as_multiformats_prints_its_cid(key: bytes) -> None:
    name = ipns_name_of(DatasetId(key))
    assert str(name) == str(CID("base36", 1, "libp2p-key", name.key_multihash))
    assert IpnsName.parse(str(name)) == IpnsName.parse(name.peer_id) == name


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello",
        "12D3Koo",  # a truncated peer id: the multihash length does not match
        "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4yeq",  # a raw-data CID, not a key
    ],
)
def test_malformed_ipns_names_raise_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="not an IPNS name"):
        IpnsName.parse(text)


def test_parse_cid_compares_across_bases_and_prints_base32() -> None:
    cid = CID("base32", 1, "raw", multihash.digest(b"hello", "sha2-256"))
    base58 = str(cid.set(base="base58btc"))
    assert base58.startswith("z")
    parsed = parse_cid(base58)
    assert parsed == cid
    assert str(parsed) == "bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bf44yegnrjhc4yeq"
    v0 = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"
    assert str(parse_cid(v0)) == v0  # CIDv0 only exists in base58btc


@pytest.mark.parametrize("text", ["", "zzz", "bafy", "/ipfs/bafy"])
def test_malformed_cids_raise_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="not a CID"):
        parse_cid(text)


@pytest.mark.parametrize(
    ("address", "multiaddr"),
    [
        ("/ip4/127.0.0.1/tcp/5001/http", "/ip4/127.0.0.1/tcp/5001/http"),
        ("http://127.0.0.1:5001", "/ip4/127.0.0.1/tcp/5001/http"),
        ("http://[::1]:5001/", "/ip6/::1/tcp/5001/http"),
        ("https://ipfs.example", "/dns/ipfs.example/tcp/443/https"),
    ],
)
def test_api_address_forms(address: str, multiaddr: str) -> None:
    assert api_multiaddr(address) == multiaddr


@pytest.mark.parametrize("address", ["127.0.0.1:5001", "ftp://host:21", "http://host:5001/api/v0"])
def test_bad_api_addresses_raise_parse_error(address: str) -> None:
    with pytest.raises(ParseError, match="not an IPFS API address"):
        api_multiaddr(address)
