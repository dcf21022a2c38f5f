"""Patterns and push targets: golden cases from kamu-cli's test_dataset_refs.rs."""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import ParseError
from protocol.identity import (
    AccountName,
    AccountOrRepoName,
    DatasetAlias,
    DatasetAliasPattern,
    DatasetAliasRemote,
    DatasetId,
    DatasetName,
    DatasetNamePattern,
    DatasetPatternAmbiguous,
    DatasetPatternRemote,
    DatasetPushTarget,
    DatasetRef,
    DatasetRefAny,
    DatasetRefAnyPattern,
    DatasetRefPattern,
    DatasetUrl,
    RepoName,
)

DATASET_ID = "did:odf:fed012126262ba49e1ba8392c26f7a39e1ba8d756c7469786d3365200c68402ff65dc"


@pytest.mark.parametrize("text", ["net.example.com", "account/net.example.com", DATASET_ID])
def test_ref_pattern_without_wildcard_is_a_ref(text: str) -> None:
    parsed = DatasetRefPattern.parse(text)
    assert parsed == DatasetRefPattern(DatasetRef.parse(text))
    assert not parsed.is_pattern
    assert str(parsed) == text


def test_ref_pattern_rejects_invalid_ref() -> None:
    with pytest.raises(ParseError, match="'invalid_ref\\^' is not a valid dataset reference"):
        DatasetRefPattern.parse("invalid_ref^")


def test_ref_pattern_with_wildcards() -> None:
    assert DatasetRefPattern.parse("net.example.%") == DatasetRefPattern(
        DatasetAliasPattern(None, DatasetNamePattern("net.example.%"))
    )
    parsed = DatasetRefPattern.parse("account/%")
    assert parsed == DatasetRefPattern(
        DatasetAliasPattern(AccountName("account"), DatasetNamePattern("%"))
    )
    assert parsed.is_pattern
    assert str(parsed) == "account/%"


def alias(text: str) -> DatasetAlias:
    return DatasetAlias.parse(text)


@pytest.mark.parametrize(
    "pattern, dataset_alias, selected",
    [
        ("%odf%", "net.example.com", False),
        ("%odf%", "net.example.odf", True),
        ("%odf%", "account1/net.example.odf", True),
        ("account1/net%", "account1/net.example.com", True),
        ("account1/net%", "account2/net.example.com", False),
        ("account1/net%", "net.example.com", False),
        (DATASET_ID, "net.example.com", True),
        ("net.example.com", "net.example.com", True),
        ("net.example.com", "net.example.org", False),
        ("nEt.eXample%", "net.example.com", True),
        ("net%com", "net.example.com", True),
        ("net%com", "net.example.co", False),
    ],
)
def test_ref_pattern_matching(pattern: str, dataset_alias: str, selected: bool) -> None:
    dataset_id = DatasetId.parse(DATASET_ID)
    assert DatasetRefPattern.parse(pattern).matches(dataset_id, alias(dataset_alias)) is selected


def test_id_ref_pattern_does_not_select_other_ids() -> None:
    other = DatasetId.new_seeded(b"other")
    assert not DatasetRefPattern.parse(DATASET_ID).matches(other, alias("x"))


def test_ref_any_pattern_without_wildcard_is_a_ref() -> None:
    assert DatasetRefAnyPattern.parse("net.example.com") == DatasetRefAnyPattern(
        DatasetRefAny(DatasetAlias(None, DatasetName("net.example.com")))
    )
    assert DatasetRefAnyPattern.parse("account/net.example.com") == DatasetRefAnyPattern(
        DatasetRefAny.parse("account/net.example.com")
    )
    assert DatasetRefAnyPattern.parse(DATASET_ID) == DatasetRefAnyPattern(
        DatasetRefAny(DatasetId.parse(DATASET_ID))
    )
    parsed = DatasetRefAnyPattern.parse("https://example.com")
    assert parsed == DatasetRefAnyPattern(DatasetRefAny(DatasetUrl("https://example.com")))
    assert not parsed.is_pattern
    with pytest.raises(ParseError, match="'invalid_ref\\^' is not a valid dataset reference"):
        DatasetRefAnyPattern.parse("invalid_ref^")


def test_ref_any_pattern_with_wildcards() -> None:
    local = DatasetRefAnyPattern.parse("net.example.%")
    assert local == DatasetRefAnyPattern(DatasetNamePattern("net.example.%"))
    ambiguous = DatasetRefAnyPattern.parse("repo/net.example.%")
    assert ambiguous == DatasetRefAnyPattern(
        DatasetPatternAmbiguous(AccountOrRepoName("repo"), DatasetNamePattern("net.example.%"))
    )
    remote = DatasetRefAnyPattern.parse("repo/account/net.example.%")
    assert remote == DatasetRefAnyPattern(
        DatasetPatternRemote(
            RepoName("repo"), AccountName("account"), DatasetNamePattern("net.example.%")
        )
    )
    assert all(p.is_pattern for p in (local, ambiguous, remote))
    assert [str(p) for p in (local, ambiguous, remote)] == [
        "net.example.%",
        "repo/net.example.%",
        "repo/account/net.example.%",
    ]


def test_ref_any_pattern_repository_depends_on_tenancy() -> None:
    local = DatasetRefAnyPattern.parse("net.example.%")
    ambiguous = DatasetRefAnyPattern.parse("repo/net.%")
    remote = DatasetRefAnyPattern.parse("repo/account/net.%")
    assert [p.is_remote_pattern(multi_tenant=False) for p in (local, ambiguous, remote)] == [
        False,
        True,
        True,
    ]
    assert [p.is_remote_pattern(multi_tenant=True) for p in (local, ambiguous, remote)] == [
        False,
        False,
        True,
    ]
    assert ambiguous.pattern_repo_name(multi_tenant=False) == RepoName("repo")
    assert ambiguous.pattern_repo_name(multi_tenant=True) is None
    assert remote.pattern_repo_name(multi_tenant=True) == RepoName("repo")
    assert local.pattern_repo_name(multi_tenant=False) is None


@pytest.mark.parametrize(
    "text, reason",
    [
        ("net.example.%-", "unexpected '-' at position 13"),
        ("%/x", "repository name '%'"),
        ("r/%a/x%", "account name '%a'"),
        ("a/b/c/d%", "dataset name pattern 'c/d%'"),
        ("net.exa^mple.%", r"unexpected '\^' at position 7"),
    ],
)
def test_ref_any_pattern_rejects(text: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        DatasetRefAnyPattern.parse(text)


def test_push_target_forms() -> None:
    assert DatasetPushTarget.parse("http://net.example.com") == DatasetPushTarget(
        DatasetUrl("http://net.example.com")
    )
    single = DatasetPushTarget.parse("net.example.com/foo")
    assert single == DatasetPushTarget(
        DatasetAliasRemote(RepoName("net.example.com"), None, DatasetName("foo"))
    )
    multi = DatasetPushTarget.parse("net.example.com/bar/foo")
    assert multi == DatasetPushTarget(
        DatasetAliasRemote(RepoName("net.example.com"), AccountName("bar"), DatasetName("foo"))
    )
    repo = DatasetPushTarget.parse("net.example.com")
    assert repo == DatasetPushTarget(RepoName("net.example.com"))
    assert [t.repo_name for t in (single, multi, repo)] == [RepoName("net.example.com")] * 3
    assert DatasetPushTarget.parse("http://net.example.com").repo_name is None
    assert str(multi) == "net.example.com/bar/foo"
    with pytest.raises(ParseError, match="not a valid push target"):
        DatasetPushTarget.parse("in^valid")


name_pattern = st.from_regex(r"[a-zA-Z0-9%.\-]{1,12}", fullmatch=True)
candidate = st.from_regex(r"[a-zA-Z0-9]{1,4}(\.[a-zA-Z0-9]{1,4}){0,3}", fullmatch=True)


@settings(deadline=None)
@given(name_pattern, candidate)
def test_name_pattern_matches_as_sql_ilike(pattern: str, name: str) -> None:
    """``%`` is SQL LIKE's any-run wildcard, compared case-insensitively (checked via fnmatch)."""
    try:
        parsed = DatasetNamePattern(pattern)
    except ParseError:
        return
    glob = pattern.lower().replace("%", "*")
    assert parsed.matches(DatasetName(name)) is fnmatchcase(name.lower(), glob)


@settings(deadline=None)
@given(st.text(max_size=40))
def test_arbitrary_text_raises_parse_error_only(text: str) -> None:
    for parse in (DatasetRefPattern.parse, DatasetRefAnyPattern.parse, DatasetPushTarget.parse):
        try:
            parse(text)
        except ParseError:
            continue
