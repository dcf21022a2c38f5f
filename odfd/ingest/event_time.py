"""Event time of a fetched source: from its metadata, from its file name, or the system time.

The time found here (the "source event time") fills the event-time column of records that do not
carry one themselves, e.g. rows of a snapshot taken at a known moment.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from odfd.ingest.errors import IngestError
from protocol.errors import ParseError
from protocol.model import EventTimeSourceFromPath, Timestamp

#: Default format of a time in a file name, as the reference uses.
DEFAULT_PATH_FORMAT = "%Y-%m-%d"

# java.text.SimpleDateFormat tokens (the spec's format language) and their strptime equivalents.
_JAVA_TOKENS = [
    ("yyyy", "%Y"),
    ("yy", "%y"),
    ("MMMM", "%B"),
    ("MMM", "%b"),
    ("MM", "%m"),
    ("dd", "%d"),
    ("HH", "%H"),
    ("hh", "%I"),
    ("mm", "%M"),
    ("ss", "%S"),
    ("SSS", "%f"),
    ("a", "%p"),
    ("XXX", "%z"),
    ("Z", "%z"),
]


def event_time_from_path(source: EventTimeSourceFromPath, name: str) -> Timestamp:
    """The time captured by the first group of ``source.pattern`` in a file name."""
    try:
        match = re.search(source.pattern, name)
    except re.error as err:
        raise IngestError(f"eventTime.fromPath: invalid pattern {source.pattern!r}: {err}") from err
    if match is None:
        raise IngestError(f"eventTime.fromPath: pattern {source.pattern!r} does not match '{name}'")
    if match.re.groups < 1 or match.group(1) is None:
        raise IngestError(f"eventTime.fromPath: pattern {source.pattern!r} has no first group")
    return parse_time(match.group(1), source.timestamp_format, f"'{name}'")


def parse_time(text: str, fmt: str | None, where: str) -> Timestamp:
    """Parses ``text`` with a strftime or SimpleDateFormat pattern; zone-less times are UTC."""
    strptime_format = _to_strptime(fmt) if fmt else DEFAULT_PATH_FORMAT
    try:
        parsed = datetime.strptime(text, strptime_format)
    except ValueError:
        try:
            return Timestamp.parse_rfc3339(text)
        except ParseError:
            raise IngestError(
                f"eventTime: '{text}' in {where} does not match the timestamp format "
                f"{fmt or DEFAULT_PATH_FORMAT!r}"
            ) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return Timestamp.from_datetime(parsed)


def _to_strptime(fmt: str) -> str:
    if "%" in fmt:
        return fmt
    out, i = [], 0
    while i < len(fmt):
        if fmt[i] == "'":
            end = fmt.find("'", i + 1)
            end = len(fmt) if end < 0 else end
            out.append(fmt[i + 1 : end] or "'")
            i = end + 1
            continue
        for token, replacement in _JAVA_TOKENS:
            if fmt.startswith(token, i):
                out.append(replacement)
                i += len(token)
                break
        else:
            out.append("%%" if fmt[i] == "%" else fmt[i])
            i += 1
    return "".join(out)
