"""Names and aliases: golden cases from kamu-cli's test_dataset_identity.rs, plus properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ParseError
from protocol.identity import (
    AccountName,
    AccountOrRepoName,
    DatasetAlias,
    DatasetAliasRemote,
    DatasetName,
    RepoName,
)


def test_dataset_name_keeps_its_text() -> None:
    name = DatasetName.parse("valid.dataset.id")
    assert str(name) == "valid.dataset.id"
    assert f"{name}" == "valid.dataset.id"
    assert name.text.startswith("valid")
    assert repr(name) == "DatasetName('valid.dataset.id')"


def test_dataset_name_equality() -> None:
    assert DatasetName("a") == DatasetName("a")
    assert DatasetName("a") != DatasetName("b")


def test_names_are_case_insensitive_but_keep_their_spelling() -> None:
    mixed, lower = DatasetName("NY-NewYork"), DatasetName("ny-newyork")
    assert mixed == lower
    assert hash(mixed) == hash(lower)
    assert {mixed: 1}[lower] == 1
    assert str(mixed) == "NY-NewYork"
    assert not mixed < lower and not lower < mixed
    assert sorted([DatasetName("b"), DatasetName("A"), DatasetName("a1")]) == [
        DatasetName("a"),
        DatasetName("a1"),
        DatasetName("b"),
    ]


def test_names_of_different_kinds_never_compare_equal() -> None:
    assert DatasetName("a") != AccountName("a")
    assert RepoName("a") != AccountOrRepoName("a")
    assert DatasetName("a") != "a"
    with pytest.raises(TypeError):
        _ = DatasetName("a") < AccountName("b")


def test_dataset_name_length_limit_is_known_but_not_enforced_like_the_reference() -> None:
    assert DatasetName.MAX_LEN == 100
    assert len(str(DatasetName("a" * 150))) == 150


@pytest.mark.parametrize(
    "text, reason",
    [
        (".invalid", r"'\.' at position 0"),
        ("invalid-", "'-' at position 7"),
        ("invalid--id", "'-' at position 7"),
        ("invalid..id", r"'\.' at position 7"),
        ("in^valid", "'\\^' at position 2"),
        ("invalid_id", "'_' at position 7"),
        ("", "empty"),
    ],
)
def test_dataset_name_validation(text: str, reason: str) -> None:
    assert str(DatasetName.parse("local.id-only")) == "local.id-only"
    with pytest.raises(ParseError, match=f"not a valid dataset name: .*{reason}"):
        DatasetName.parse(text)


def test_remote_alias_validation() -> None:
    alias = DatasetAliasRemote.parse("repo.name/local.id")
    assert str(alias) == "repo.name/local.id"
    assert str(alias.dataset_name) == "local.id"
    assert alias.account_name is None
    assert str(alias.repo_name) == "repo.name"
    assert not alias.is_multi_tenant

    alias = DatasetAliasRemote.parse("repo.name/user-name/local.id")
    assert str(alias) == "repo.name/user-name/local.id"
    assert str(alias.dataset_name) == "local.id"
    assert alias.account_name is not None and str(alias.account_name) == "user-name"
    assert str(alias.repo_name) == "repo.name"
    assert alias.is_multi_tenant
    assert alias.local_alias() == DatasetAlias.parse("user-name/local.id")


@pytest.mark.parametrize(
    "text, reason",
    [
        ("repo.name/.invalid", "dataset name '.invalid'"),
        (".invalid/local.id", "repository name '.invalid'"),
        ("repo.name/user-name/.invalid", "dataset name '.invalid'"),
        ("repo.name/.invalid/local.id", "account name '.invalid'"),
        (".invalid/user-name/local.id", "repository name '.invalid'"),
        ("local.id", "no '/'"),
        ("a/b/c/d", "dataset name 'c/d'"),
    ],
)
def test_remote_alias_rejects(text: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        DatasetAliasRemote.parse(text)


def test_local_alias_validation() -> None:
    alias = DatasetAlias.parse("local.id")
    assert str(alias) == "local.id"
    assert str(alias.dataset_name) == "local.id"
    assert alias.account_name is None

    alias = DatasetAlias.parse("user-name/local.id")
    assert str(alias.dataset_name) == "local.id"
    assert alias.account_name is not None and str(alias.account_name) == "user-name"
    assert alias.as_remote_alias(RepoName("repo")) == DatasetAliasRemote.parse(
        "repo/user-name/local.id"
    )


@pytest.mark.parametrize(
    "text, reason",
    [
        ("repo.name/user-name/blah", "dataset name 'user-name/blah'"),
        ("user-name/.invalid", "dataset name '.invalid'"),
        (".invalid/local.id", "account name '.invalid'"),
        ("invalid_alias", "'_' at position 7"),
    ],
)
def test_local_alias_rejects(text: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        DatasetAlias.parse(text)


@pytest.mark.parametrize(
    "left, right, equal",
    [
        ("account/net.example.com", "aCCouNt/net.ExaMplE.coM", True),
        ("account/net.example.com", "account/net.example.com", True),
        ("net.example.com", "net.ExaMplE.coM", True),
        ("account/net.example.com", "aCCouNt1/net.eXamPle.cOm", False),
        ("account1/net.example.com", "account/net.example.com", False),
        ("net.example.com", "account/net.example.com", False),
    ],
)
def test_alias_equality(left: str, right: str, equal: bool) -> None:
    assert (DatasetAlias.parse(left) == DatasetAlias.parse(right)) is equal
    if equal:
        assert hash(DatasetAlias.parse(left)) == hash(DatasetAlias.parse(right))


@pytest.mark.parametrize(
    "left, right, equal",
    [
        ("repository/net.example.com", "repository/net.ExaMplE.coM", True),
        ("repository/net.example.com", "repository/net.example.com", True),
        ("repository/account/net.example.com", "repository/AccOuNt/net.ExaMplE.coM", True),
        ("repository/net.example.com", "rEpoSitOry/net.ExaMplE.coM", True),
        ("repository/account/net.example.com", "repository/net.example.com", False),
    ],
)
def test_remote_alias_equality(left: str, right: str, equal: bool) -> None:
    assert (DatasetAliasRemote.parse(left) == DatasetAliasRemote.parse(right)) is equal


def test_alias_ordering_puts_single_tenant_first_like_the_reference() -> None:
    aliases = [DatasetAlias.parse(text) for text in ("b/x", "z", "A/y", "a/X")]
    assert [str(alias) for alias in sorted(aliases)] == ["z", "a/X", "A/y", "b/x"]


def test_aliases_refuse_plain_strings_as_components() -> None:
    with pytest.raises(TypeError, match="dataset_name must be a DatasetName"):
        # A plain str on purpose: the constructor must refuse it.
        DatasetAlias(None, "name")  # type: ignore[arg-type]


subdomain = st.from_regex(r"[a-zA-Z0-9]{1,5}(-[a-zA-Z0-9]{1,5}){0,2}", fullmatch=True)
hostname = st.lists(subdomain, min_size=1, max_size=3).map(".".join)


@settings(deadline=None)
@given(st.none() | hostname, hostname)
def test_alias_round_trips(account: str | None, name: str) -> None:
    text = name if account is None else f"{account}/{name}"
    alias = DatasetAlias.parse(text)
    assert str(alias) == text
    assert DatasetAlias.parse(text.swapcase()) == alias


@settings(deadline=None)
@given(hostname, st.none() | hostname, hostname)
def test_remote_alias_round_trips(repo: str, account: str | None, name: str) -> None:
    text = f"{repo}/{name}" if account is None else f"{repo}/{account}/{name}"
    assert str(DatasetAliasRemote.parse(text)) == text


@settings(deadline=None)
@given(st.text(max_size=30))
def test_arbitrary_text_raises_parse_error_only(text: str) -> None:
    for parse in (DatasetName.parse, DatasetAlias.parse, DatasetAliasRemote.parse):
        try:
            parsed = parse(text)
        except ParseError:
            continue
        assert str(parsed) == text
