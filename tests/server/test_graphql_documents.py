"""Which request texts the GraphQL server keeps parsed between requests."""

from __future__ import annotations

from graphql import DocumentNode, ExecutionResult

from odfd.server.graphql.documents import Documents

SEARCH = '{ search { query(query: "a", perPage: 100) { nodes { ... on Dataset { id } } } } }'
LOGIN = (
    "mutation { auth { login(loginMethod: PASSWORD, "
    'loginCredentialsJson: "{\\"login\\":\\"alice\\",\\"password\\":\\"s3cret\\"}") '
    "{ accessToken } } }"
)


def test_a_query_is_kept_and_reused() -> None:
    documents = Documents()
    first = documents.get(SEARCH)
    assert isinstance(first, DocumentNode)
    assert documents.get(SEARCH) is first


def test_a_mutation_text_is_not_kept() -> None:
    """An inline login holds a password in its text: parsed for its request, then dropped."""
    documents = Documents()
    first = documents.get(LOGIN)
    assert isinstance(first, DocumentNode)
    second = documents.get(LOGIN)
    assert isinstance(second, DocumentNode)
    assert second is not first


def test_an_invalid_text_answers_its_errors() -> None:
    answer = Documents().get("{ nosuchfield }")
    assert isinstance(answer, ExecutionResult)
    assert answer.data is None
    assert answer.errors and "nosuchfield" in answer.errors[0].message
