"""GraphQL requests parsed and validated once per text: clients send the same few queries again
and again (kamu-cli's search is one fixed text), and parsing and validating one costs more CPU
than answering it over a few datasets; a kept document is executed directly."""

from __future__ import annotations

from graphql import (
    DocumentNode,
    ExecutionResult,
    GraphQLError,
    OperationDefinitionNode,
    OperationType,
    parse,
    validate,
)

from odfd.server.graphql.schema import schema
from storage.lru import Lru

MAX_TOKENS = 20_000
"""A bound on a request's size in GraphQL tokens (an introspection query is under 400), so a
request cannot make the parser's work unbounded within the 1 MiB body limit."""
KEPT_TEXT = 16_384
"""Longer texts are parsed for each request, not kept."""


def _keepable(text: str, document: DocumentNode) -> bool:
    """Short queries only: a mutation's text may hold credentials (``auth.login`` written
    inline rather than in variables), which must not outlive the request."""
    return len(text) <= KEPT_TEXT and not any(
        isinstance(definition, OperationDefinitionNode)
        and definition.operation is OperationType.MUTATION
        for definition in document.definitions
    )


class Documents:
    """Valid documents by their text, the most recently used ``limit`` of them."""

    def __init__(self, limit: int = 64) -> None:
        self._kept: Lru[str, DocumentNode] = Lru(limit)

    def get(self, text: str) -> DocumentNode | ExecutionResult:
        """The document of ``text``, or the answer of a request that does not parse or is not
        valid against the schema (its errors, no data)."""
        kept = self._kept.get(text)
        if kept is not None:
            return kept
        try:
            document = parse(text, max_tokens=MAX_TOKENS)
        except GraphQLError as error:
            return ExecutionResult(None, [error])
        errors = validate(schema(), document)
        if errors:
            return ExecutionResult(None, errors)
        if _keepable(text, document):
            self._kept.put(text, document)
        return document
