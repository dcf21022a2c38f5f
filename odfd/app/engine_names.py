"""The verification engines' names, for argument parsers (``odfd sql``, ``odfd verify``) that
must not load the engines themselves (``verifier.engine.registry`` checks it knows each one)."""

from __future__ import annotations

from verifier.engine.names import ENGINE_NAMES

__all__ = ["ENGINE_NAMES"]
