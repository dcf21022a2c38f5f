"""The PEG grammar: golden prefix splits from kamu-cli's test_grammar.rs, plus properties."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.identity.grammar import (
    HOSTNAME,
    NAME_PATTERN,
    has_url_scheme,
    is_hostname,
    match_prefix,
    split_remote_dataset_id,
)

VALID_PATTERNS = [
    "net.example.%",
    "net.e%.com",
    "net-%.com",
    "net%net",
    "%.example.com",
    "%e",
    "%-e",
    "net%.ex%.com",
    "%.ex%.com",
    "%.ex%.c%",
    "%-net.ex-%.c-%",
    "%",
    "%a%%",
]


@pytest.mark.parametrize("pattern", VALID_PATTERNS)
def test_valid_patterns_match_whole(pattern: str) -> None:
    assert match_prefix(NAME_PATTERN, pattern) == (pattern, "")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("net.example.%-", ("net.example.%", "-")),
        ("net.exa^mple.%", ("net.exa", "^mple.%")),
        ("&net%.exa%mple.net", None),
        (
            "did:odf:fed012126262ba49e1ba8392c26f7a39e1ba8d756c7469786d3365200c68402ff65%",
            (
                "did",
                ":odf:fed012126262ba49e1ba8392c26f7a39e1ba8d756c7469786d3365200c68402ff65%",
            ),
        ),
    ],
)
def test_invalid_patterns_stop_where_the_reference_stops(
    text: str, expected: tuple[str, str] | None
) -> None:
    assert match_prefix(NAME_PATTERN, text) == expected


@pytest.mark.parametrize(
    "text, valid",
    [
        ("local.id-only", True),
        ("a", True),
        ("A1-b2.C3", True),
        ("", False),
        (".invalid", False),
        ("invalid-", False),
        ("invalid--id", False),
        ("invalid..id", False),
        ("in^valid", False),
        ("invalid_id", False),
        ("ünïcode", False),
        ("name\n", False),
    ],
)
def test_hostname(text: str, valid: bool) -> None:
    assert is_hostname(text) is valid


@pytest.mark.parametrize(
    "text, expected",
    [
        ("did:odf:fed01ab", (None, "did:odf:fed01ab")),
        ("repo/did:odf:zAb+/=", ("repo", "did:odf:zAb+/=")),
        ("did:odf:", None),
        ("did:odf:fed01ab/x", None),
        ("re_po/did:odf:fed01ab", None),
        ("repo/acc/did:odf:fed01ab", None),
        ("dataset", None),
    ],
)
def test_remote_dataset_id_shape(text: str, expected: tuple[str | None, str] | None) -> None:
    assert split_remote_dataset_id(text) == expected


@pytest.mark.parametrize(
    "text, is_url",
    [
        ("https://example.com", True),
        ("odf+https://example.com", True),
        ("s3+http://bucket", True),
        ("file:///tmp/x", True),
        ("foo:bar", False),
        ("+http://x", False),
        ("http+://x", False),
        ("http:/x", False),
    ],
)
def test_url_scheme(text: str, is_url: bool) -> None:
    assert has_url_scheme(text) is is_url


SUBDOMAIN_REGEX = re.compile(r"[a-zA-Z0-9]+(-[a-zA-Z0-9]+)*")

hostname_chars = st.text(alphabet="ab9Z-.%_", max_size=12)


@settings(deadline=None)
@given(hostname_chars)
def test_hostname_agrees_with_a_plain_reading_of_the_spec(text: str) -> None:
    """Hostname = Subdomain ("." Subdomain)*, checked by splitting on dots instead of a regex."""
    expected = bool(text) and all(SUBDOMAIN_REGEX.fullmatch(part) for part in text.split("."))
    assert is_hostname(text) is expected
    assert (HOSTNAME.fullmatch(text) is not None) is expected


@settings(deadline=None)
@given(hostname_chars)
def test_every_hostname_is_a_name_pattern(text: str) -> None:
    if is_hostname(text):
        assert match_prefix(NAME_PATTERN, text) == (text, "")
