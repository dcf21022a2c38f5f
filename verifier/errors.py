"""Typed errors of the verifier (findings are not errors: they go into the report)."""

from __future__ import annotations

from protocol.errors import OdfError


class VerifierError(OdfError):
    """Base class of the verifier layer's errors (the checks and the Spark engine)."""


class VerifyError(VerifierError):
    """Base class of errors that stop a verification before it produces a report."""


class VerifyUsageError(VerifyError):
    """The request cannot be carried out as asked (a ``--from``/``--to`` block not in the chain...).

    Nothing was verified, so the command exits with "could not be verified" (2), not "failed".
    """

    exit_code = 2
