"""Errors of the query-answer protocol: requests that do not parse, results that cannot be
rendered, and proofs that cannot be checked."""

from __future__ import annotations

from protocol.errors import DecodeError, EncodeError, ProtocolError


class QueryProtocolError(ProtocolError):
    """Base class of the errors of ``protocol.query``."""


class RequestError(QueryProtocolError, DecodeError):
    """A query or verify request (JSON body or query string) that does not parse.

    ``path`` names the field (``datasets[0].blockHash``; empty for the document itself) and
    ``reason`` says what is wrong, in the words the reference's deserializer uses where it has
    them (``unknown field `foo`, expected one of ...``).
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}" if path else reason)


class RenderError(QueryProtocolError, EncodeError):
    """A query result that cannot be written in the requested data or schema format."""


class DataTooLargeError(RenderError):
    """A JsonSoA answer outgrew its buffer (the format cannot be streamed)."""


class UnsupportedProofTypeError(QueryProtocolError):
    """A proof of a kind this node cannot check (the reference answers 501 for it too)."""
