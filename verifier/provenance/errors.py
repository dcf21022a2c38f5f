"""Typed errors of provenance queries: one line each, naming what is wrong."""

from __future__ import annotations

from verifier.errors import VerifierError


class ProvenanceError(VerifierError):
    """A provenance question cannot be answered (bad input, a missing file, a failed check)."""


class UnsupportedProvenanceError(ProvenanceError):
    """The transform uses a construct the tag-flow rewrite does not cover (never guessed at)."""


class ProvenanceCheckError(ProvenanceError):
    """The witness rows found do not reproduce the selected row when the transform re-runs."""
