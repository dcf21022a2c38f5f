"""Parsing a remote URL gives the transport that reaches it, with the node's settings: the
canonical URL it is recorded under, the name a pulled dataset gets, whether and how strictly it
speaks the Smart Transfer Protocol, the peer a scheduler counts it against, and an error naming
what is wrong with a URL no transport takes. No client library is needed for any of it."""

from __future__ import annotations

from pathlib import Path

import pytest

from odfd.sync.errors import UnsupportedUrlError
from odfd.sync.transport.file import FileTransport
from odfd.sync.transport.ipfs import IpfsTransport
from odfd.sync.transport.ipns import IpnsTransport
from odfd.sync.transport.s3 import S3Transport
from odfd.sync.transport.settings import TransportSettings
from odfd.sync.transport.simple_http import SimpleHttpTransport
from odfd.sync.transport.smart_http import SmartHttpTransport
from odfd.sync.transport.url import canonical_url, parse_remote, peer_key
from storage.ipfs_settings import IpfsSettings
from storage.s3_settings import S3Credentials, S3Settings
from storage.stores.http_limits import HttpLimits


def test_http_urls_speak_smart_unless_told_otherwise() -> None:
    limits = HttpLimits(connect=1.0)
    settings = TransportSettings(limits=limits)
    auto = parse_remote("http://node.example/acme/trades/", settings, token="t")
    assert isinstance(auto, SmartHttpTransport)
    assert (auto.url, auto.http_base, auto.limits) == (
        "http://node.example/acme/trades",
        "http://node.example/acme/trades/",
        limits,
    )
    assert auto.smart is not None and not auto.smart.required and auto.smart.token == "t"
    assert str(auto.default_name()) == "trades"

    only = parse_remote("odf+https://node.example/trades")
    assert only.smart is not None and only.smart.required
    assert only.smart.http_base == "https://node.example/trades/"
    assert only.url == "odf+https://node.example/trades"  # recorded as given
    forced = parse_remote("http://node.example/x", protocol="smart").smart
    assert forced is not None and forced.required

    simple = parse_remote("http://node.example/x", protocol="simple", limits=HttpLimits(5.0))
    assert type(simple) is SimpleHttpTransport and simple.smart is None
    assert simple.limits == HttpLimits(5.0)


def test_other_schemes_and_their_settings(tmp_path: Path) -> None:
    ipfs = IpfsSettings(api="/ip4/127.0.0.1/tcp/1/http", gateway="http://127.0.0.1:2")
    s3 = S3Settings(remotes={"s3://bucket/": S3Credentials("key", "secret")})
    settings = TransportSettings(ipfs=ipfs, s3=s3)
    folder = parse_remote(f"file://{tmp_path}/a/../cities")
    assert folder == FileTransport(tmp_path / "cities")
    assert folder.url == f"file://{tmp_path}/cities" and str(folder.default_name()) == "cities"
    by_cid = parse_remote("ipfs://bafy/datasets/cities/", settings)
    assert by_cid == IpfsTransport("ipfs://bafy/datasets/cities", "bafy", "datasets/cities", ipfs)
    by_name = parse_remote("ipns://", settings)
    assert isinstance(by_name, IpnsTransport) and by_name.name == "" and by_name.ipfs == ipfs
    bucket = parse_remote("s3://bucket/odf/cities", settings)
    assert isinstance(bucket, S3Transport) and bucket.settings == s3
    assert bucket.url == "s3://bucket/odf/cities" and bucket.location.prefix == "odf/cities/"
    assert all(t.smart is None for t in (folder, by_cid, by_name, bucket))
    assert canonical_url("s3+http://127.0.0.1:9000/bucket/x/") == (
        "s3+http://127.0.0.1:9000/bucket/x"
    )


def test_peer_keys() -> None:
    assert peer_key("s3+http://127.0.0.1:9000/bucket/x") == "127.0.0.1:9000"
    assert peer_key("s3+https://S3.example/bucket/x") == "s3.example:443"
    assert peer_key("s3://bucket/x") == "s3"
    assert peer_key("http://node.example:99999/x") == "node.example:0"  # a bad port
    assert peer_key("ftp://node.example/x") == ""


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://node.example/x", "unsupported URL; use http"),
        ("http:///x", "needs a host"),
        ("odf+file:///x", r"odf\+ only goes with http"),
        ("file://host/x", "must name a local path"),
        ("s3://B/x", "is not a bucket name"),
    ],
)
def test_urls_no_transport_takes_are_named(url: str, message: str) -> None:
    with pytest.raises(UnsupportedUrlError, match=message) as error:
        parse_remote(url)
    assert url.split("/")[0] in str(error.value)


def test_the_settings_of_a_node(tmp_path: Path) -> None:
    from odfd.config import load_config

    config = tmp_path / "config.toml"
    config.write_text(
        '[sync]\nconnect_timeout = "3s"\n[sync.tokens]\n"http://a.example/" = "ta"\n'
        '[ipfs]\napi = "/ip4/127.0.0.1/tcp/7/http"\n[s3]\nregion = "eu-west-1"\n'
    )
    settings = TransportSettings.from_config(load_config(config, env={}))
    assert settings.limits.connect == 3.0 and settings.ipfs.api == "/ip4/127.0.0.1/tcp/7/http"
    assert settings.s3.region == "eu-west-1" and settings.token_for("http://a.example/x") == "ta"
    assert parse_remote("ipfs://bafy", settings).ipfs == settings.ipfs  # type: ignore[attr-defined]
