"""Typed errors shared by every layer of odfd.

Every error odfd raises on purpose derives from :class:`OdfError`, so the CLI can tell a problem
with the user's input or data (reported as a clear message) from a bug (reported with a traceback).
"""


class OdfError(Exception):
    """Base class of every error odfd raises deliberately."""


class ProtocolError(OdfError):
    """Base class of the protocol layer's errors (identities, model, codecs, hashes, wire formats).

    Each layer has one: ``storage.errors.StorageError``, ``verifier.errors.VerifierError``,
    ``odfd.errors.OdfdError``.
    """


class ParseError(ProtocolError, ValueError):
    """Text that should hold an identifier, hash, reference or timestamp does not."""


class DecodeError(ProtocolError, ValueError):
    """Bytes or a document that should hold ODF metadata are malformed or of an unknown kind."""


class EncodeError(ProtocolError, ValueError):
    """A model object cannot be represented in the requested encoding."""
