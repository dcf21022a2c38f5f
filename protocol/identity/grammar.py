"""The spec's PEG grammar for dataset identity ("Aliases and References"), as compiled regexes.

PEG repetition is greedy and never gives back, and its choice commits to the first alternative
that matches. Possessive quantifiers and atomic groups give regexes the same semantics, so a
prefix match here consumes exactly what the reference's hand-written PEG matcher consumes; the
golden tests check the (matched, rest) splits.

```
Hostname  = Subdomain ("." Subdomain)*
Subdomain = [a-zA-Z0-9]+ ("-" [a-zA-Z0-9]+)*
DatasetId = "did:odf:" Multibase       Multibase = [a-zA-Z0-9+/=]+
Url       = Scheme "://" [^\\n]+        Scheme    = [a-zA-Z0-9]+ ("+" [a-zA-Z0-9]+)*
```

Name patterns (the reference's extension for `%` wildcards):

```
NamePattern   = Pattern / Hostname
Pattern       = StartElement? ("%"+ MiddleElement)* "%"+ EndElement?
StartElement  = Hostname ("." / "-")?
MiddleElement = (("." / "-")? Hostname ("." / "-")? / "." / "-") &.
EndElement    = ("." / "-")? Hostname
```
"""

from __future__ import annotations

import re

_SUBDOMAIN = r"[a-zA-Z0-9]++(?:-[a-zA-Z0-9]++)*+"
_HOSTNAME = rf"{_SUBDOMAIN}(?:\.{_SUBDOMAIN})*+"
_SEPARATOR = r"[.\-]"
_PATTERN = (
    rf"(?:{_HOSTNAME}{_SEPARATOR}?+)?+"
    rf"(?:%++(?>{_SEPARATOR}?+{_HOSTNAME}{_SEPARATOR}?+|{_SEPARATOR})(?=[\s\S]))*+"
    rf"%++"
    rf"(?:{_SEPARATOR}?+{_HOSTNAME})?+"
)

HOSTNAME = re.compile(_HOSTNAME)
NAME_PATTERN = re.compile(rf"(?>{_PATTERN}|{_HOSTNAME})")
DATASET_ID = re.compile(r"did:odf:[a-zA-Z0-9+/=]++")
SCHEME = re.compile(r"[a-zA-Z0-9]++(?:\+[a-zA-Z0-9]++)*+")

DID_ODF_PREFIX = "did:odf:"


def match_prefix(pattern: re.Pattern[str], text: str) -> tuple[str, str] | None:
    """Split ``text`` into (what ``pattern`` consumes from its start, the rest); None if nothing."""
    found = pattern.match(text)
    if found is None or not found.group():
        return None
    return found.group(), text[found.end() :]


def is_hostname(text: str) -> bool:
    """Whether the whole of ``text`` is a Hostname (the grammar of every name component)."""
    return HOSTNAME.fullmatch(text) is not None


def is_name_pattern(text: str) -> bool:
    """Whether the whole of ``text`` is a name pattern (a Hostname, possibly with ``%``)."""
    return NAME_PATTERN.fullmatch(text) is not None


def hostname_problem(text: str) -> str:
    """Explain why ``text`` is not a Hostname, naming the first offending position."""
    if not text:
        return "it is empty"
    found = HOSTNAME.match(text)
    stop = found.end() if found else 0
    char = text[stop] if stop < len(text) else text[-1]
    if char in ".-":
        return f"{char!r} at position {min(stop, len(text) - 1)} must sit between letters or digits"
    if stop == 0:
        return f"it must start with a letter or digit, not {char!r}"
    return (
        f"character {char!r} at position {stop} is not allowed (only letters, digits, '-' and '.')"
    )


def split_remote_dataset_id(text: str) -> tuple[str | None, str] | None:
    """Match ``(RepoName "/")? DatasetId`` exactly; return (repo, id text) or None.

    Splits on the first ``/`` as the reference does, so a base64 id containing ``/`` is not
    recognised here (the reference has the same limit; plain ids parse through ``DatasetId``).
    """
    repo, slash, rest = text.partition("/")
    if not slash:
        return (None, text) if DATASET_ID.fullmatch(text) else None
    if is_hostname(repo) and DATASET_ID.fullmatch(rest):
        return repo, rest
    return None


def has_url_scheme(text: str) -> bool:
    """Whether ``text`` starts with ``Scheme "://"``, which makes it a URL reference."""
    found = SCHEME.match(text)
    return found is not None and text.startswith("://", found.end())
