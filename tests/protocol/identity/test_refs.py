"""Dataset references: golden cases from kamu-cli's test_dataset_identity.rs, plus properties."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ParseError
from protocol.identity import (
    AccountName,
    AccountOrRepoName,
    DatasetAlias,
    DatasetAliasAmbiguous,
    DatasetAliasRemote,
    DatasetId,
    DatasetIdRemote,
    DatasetName,
    DatasetRef,
    DatasetRefAny,
    DatasetRefRemote,
    DatasetUrl,
    RepoName,
)

KEY_ID_B58 = "did:odf:z6MkmgVreHBu2ABaD59Jq1J2JneXwzpsUWwEWXS4kLhjb4V4"
MULTIHASH_ID = "did:odf:fed012126262ba49e1ba8392c26f7a39e1ba8d756c7469786d3365200c68402ff65dc"


def always(_: RepoName) -> bool:
    return True


def never(_: RepoName) -> bool:
    return False


def test_ref_any_single_name_is_a_local_alias() -> None:
    assert DatasetRefAny.parse("dataset") == DatasetRefAny(
        DatasetAlias(None, DatasetName("dataset"))
    )


def test_ref_any_two_part_alias_stays_ambiguous() -> None:
    parsed = DatasetRefAny.parse("mystery/dataset")
    assert parsed == DatasetRefAny(
        DatasetAliasAmbiguous(AccountOrRepoName("mystery"), DatasetName("dataset"))
    )
    assert str(parsed) == "mystery/dataset"


def test_ref_any_ambiguous_alias_resolves_as_repo_when_it_is_one() -> None:
    assert DatasetRefAny.parse("repo/dataset").as_remote_ref(always) == DatasetRefRemote(
        DatasetAliasRemote(RepoName("repo"), None, DatasetName("dataset"))
    )


def test_ref_any_ambiguous_alias_resolves_as_account_otherwise() -> None:
    assert DatasetRefAny.parse("acc/dataset").as_local_ref(never) == DatasetRef(
        DatasetAlias(AccountName("acc"), DatasetName("dataset"))
    )


def test_ref_any_three_part_alias_is_remote() -> None:
    parsed = DatasetRefAny.parse("repo/account/dataset")
    assert parsed.as_remote_ref(always) == DatasetRefRemote(
        DatasetAliasRemote(RepoName("repo"), AccountName("account"), DatasetName("dataset"))
    )
    assert parsed.as_remote_ref(never) == parsed.as_remote_ref(always)


def test_ref_any_ids() -> None:
    seeded = DatasetId.new_seeded(b"key")
    assert DatasetRefAny.parse(KEY_ID_B58) == DatasetRefAny(seeded)
    assert DatasetRefAny.parse(f"repo/{KEY_ID_B58}") == DatasetRefAny(
        DatasetIdRemote(RepoName("repo"), seeded)
    )
    assert DatasetRefAny.parse(KEY_ID_B58).id == seeded
    assert DatasetRefAny.parse(f"repo/{KEY_ID_B58}").id == seeded


@pytest.mark.parametrize(
    "url",
    [
        "https://opendata.ca/odf/census-2016-population/",
        "ipfs://bafkreie3hfshd4ikinnbio3kewo2hvj6doh5jp3p23iwk2evgo2un5g7km/",
        "https://example.com",
        "odf+https://node.example.com:8443/datasets/x",
        "odf+http://127.0.0.1:8080/",
        "ipns://k51qzi5uqu5dh/",
        "s3+https://minio.local/bucket/prefix",
        "file:///var/odf/repo/dataset",
    ],
)
def test_ref_any_urls_keep_their_text(url: str) -> None:
    parsed = DatasetRefAny.parse(url)
    assert parsed == DatasetRefAny(DatasetUrl(url))
    assert str(parsed) == url
    assert DatasetRefRemote.parse(url).url == DatasetUrl(url)


def test_url_exposes_scheme_and_parts() -> None:
    url = DatasetUrl("ODF+HTTPS://node.example.com:8443/x")
    assert url.scheme == "odf+https"
    assert url.parts().port == 8443


@pytest.mark.parametrize(
    "text, reason",
    [
        ("foo:bar", "':' at position 3"),
        ("did:odf:zzz", "ed25519-pub multicodec prefix"),
        (f"repo/{MULTIHASH_ID[:-1]}", "malformed base16"),
        (f"repo/{MULTIHASH_ID[:-2]}", "32 bytes, got 31"),
        ("in^valid", r"'\^' at position 2"),
        ("a/b/c/d", "dataset name 'c/d'"),
        ("https://", "nothing follows"),
        ("https:///path", "needs a host"),
        ("http://a b/", "' ' at position 8 must be percent-encoded"),
        ("http://host:99999/", "[Pp]ort"),
        ("", "empty"),
    ],
)
def test_ref_any_rejects(text: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        DatasetRefAny.parse(text)


def test_local_ref_parses_ids_and_aliases() -> None:
    assert DatasetRef.parse(MULTIHASH_ID).id == DatasetId.new_seeded(b"multihash")
    assert DatasetRef.parse("account/net.example.com").alias == DatasetAlias.parse(
        "account/net.example.com"
    )
    ref = DatasetRef.parse("Account/Net.Example.com")
    assert (str(ref.account_name), str(ref.dataset_name)) == ("Account", "Net.Example.com")
    assert DatasetRef.parse("account/net.example.com") == ref


@pytest.mark.parametrize(
    "text, reason",
    [
        ("did:odf:fed01", "32 bytes"),
        ("repo/acc/name", "dataset name 'acc/name'"),
        ("https://example.com/x", "a URL refers to a remote dataset"),
        ("invalid_ref^", "'_' at position 7"),
    ],
)
def test_local_ref_rejects(text: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        DatasetRef.parse(text)


def test_remote_ref_variants() -> None:
    seeded = DatasetId.new_seeded(b"key")
    assert DatasetRefRemote.parse(KEY_ID_B58) == DatasetRefRemote(seeded)
    by_repo = DatasetRefRemote.parse(f"hub/{KEY_ID_B58}")
    assert (by_repo.repo_name, by_repo.id) == (RepoName("hub"), seeded)
    alias = DatasetRefRemote.parse("hub/acc/name")
    assert (alias.repo_name, alias.account_name, alias.dataset_name) == (
        RepoName("hub"),
        AccountName("acc"),
        DatasetName("name"),
    )
    assert alias.id is None and alias.url is None
    with pytest.raises(ParseError, match="no '/'"):
        DatasetRefRemote.parse("name")


def test_conversions_into_refs() -> None:
    seeded = DatasetId.new_seeded(b"key")
    assert DatasetRef(seeded).id == seeded
    # A DatasetName on purpose: the constructors promote it to an alias (their hints name only
    # the targets they store).
    assert DatasetRef(DatasetName("bar")) == DatasetRef.parse("bar")  # type: ignore[arg-type]
    assert DatasetRefRemote(seeded).id == seeded
    assert DatasetRefRemote(DatasetAliasRemote.parse("foo/bar")) == DatasetRefRemote.parse(
        "foo/bar"
    )
    assert DatasetRefAny(seeded) == DatasetRefAny.parse(str(seeded))
    assert DatasetRefAny(DatasetName("bar")) == DatasetRefAny.parse("bar")  # type: ignore[arg-type]
    assert DatasetRef.parse("bar").as_any_ref() == DatasetRefAny.parse("bar")
    remote = DatasetRefRemote.parse("foo/bar")
    assert remote.as_any_ref().disambiguate(never) == remote
    with pytest.raises(TypeError):
        DatasetRef("bar")  # type: ignore[arg-type]


def test_disambiguation_errors_name_the_reference() -> None:
    with pytest.raises(ParseError, match="'repo/x' is not a valid local dataset reference"):
        DatasetRefAny.parse("repo/x").as_local_ref(always)
    with pytest.raises(ParseError, match="'x' is not a valid remote dataset reference"):
        DatasetRefAny.parse("x").as_remote_ref(always)


def test_refs_are_hashable_and_case_insensitive() -> None:
    refs = {DatasetRefAny.parse("Acc/Name"), DatasetRefAny.parse("acc/name")}
    assert len(refs) == 1


subdomain = st.from_regex(r"[a-zA-Z0-9]{1,5}(-[a-zA-Z0-9]{1,5}){0,2}", fullmatch=True)
hostname = st.lists(subdomain, min_size=1, max_size=3).map(".".join)
ids = st.binary(min_size=32, max_size=32).map(lambda key: str(DatasetId(key)))
ref_texts = st.one_of(
    ids,
    st.tuples(hostname, ids).map("/".join),
    hostname,
    st.tuples(hostname, hostname).map("/".join),
    st.tuples(hostname, hostname, hostname).map("/".join),
    hostname.map(lambda host: f"odf+https://{host}/datasets"),
)


@settings(deadline=None)
@given(ref_texts)
def test_parsed_refs_round_trip(text: str) -> None:
    parsed = DatasetRefAny.parse(text)
    assert str(parsed) == text
    assert DatasetRefAny.parse(str(parsed)) == parsed
    for is_repo in (always, never):
        assert str(parsed.disambiguate(is_repo)) == text


@settings(deadline=None)
@given(st.text(max_size=40))
def test_arbitrary_text_raises_parse_error_only(text: str) -> None:
    for parse in (DatasetRef.parse, DatasetRefRemote.parse, DatasetRefAny.parse):
        try:
            parse(text)
        except ParseError:
            continue


def test_identities_survive_pickling_for_process_pools() -> None:
    values = [
        DatasetId.new_seeded(b"a"),
        DatasetName("Mixed.Case"),
        DatasetRefAny.parse("acc/name"),
        DatasetRefAny.parse("odf+https://host/x"),
        DatasetRef.parse(MULTIHASH_ID),
    ]
    for value in values:
        restored = pickle.loads(pickle.dumps(value))
        assert restored == value and hash(restored) == hash(value) and str(restored) == str(value)
