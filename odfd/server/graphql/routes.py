"""``POST /graphql`` (and ``GET /graphql?query=...``): a GraphQL request in, its result out as
GraphQL answers, ``{"data": ..., "errors": [{"message", "locations", "path"}]}``. A request
that is not one (no JSON object, no ``query`` text) is a 400 with ``{"message": ...}``, as the
node's other APIs answer a bad request."""

from __future__ import annotations

import json
import logging
from inspect import isawaitable
from typing import Any

from aiohttp import web
from graphql import (
    DocumentNode,
    ExecutionResult,
    GraphQLError,
    OperationType,
    execute,
    get_operation_ast,
)

from odfd.app.authorization import ANONYMOUS, Action
from odfd.app.dataset_details import SummaryCache
from odfd.app.graphql_datasets import Caller
from odfd.server.graphql.documents import Documents
from odfd.server.graphql.resolvers import Context, default_field, type_name
from odfd.server.graphql.schema import schema
from odfd.server.query_api import context
from odfd.server.query_api.errors import error_response
from odfd.server.query_api.platform import THROTTLE_KEY
from protocol.errors import OdfError

SUMMARIES_KEY: web.AppKey[SummaryCache] = web.AppKey("odfd_graphql_summaries", SummaryCache)
"""Each dataset's records and size, kept by head between requests."""
DOCUMENTS_KEY: web.AppKey[Documents] = web.AppKey("odfd_graphql_documents", Documents)
_log = logging.getLogger(__name__)


class BadGraphQLRequest(ValueError):
    """The HTTP request does not carry a GraphQL request."""


async def handle(request: web.Request) -> web.StreamResponse:
    if context.NODE_KEY not in request.app:
        return error_response(404, "this server does not serve the query API, which GraphQL reads")
    try:
        query, variables, operation = await _graphql_request(request)
    except BadGraphQLRequest as error:
        return error_response(400, str(error))
    document = request.app[DOCUMENTS_KEY].get(query)
    if isinstance(document, ExecutionResult):
        return web.json_response(document.formatted)
    if request.method == "GET" and _is_mutation(document, operation):
        return error_response(405, "a mutation is sent with POST, not GET")
    result = execute(
        schema(),
        document,
        context_value=_context(request),
        variable_values=variables,
        operation_name=operation,
        field_resolver=default_field,
        type_resolver=type_name,
    )
    if isawaitable(result):
        result = await result
    for failed in result.errors or ():
        cause = failed.original_error
        if cause is not None and not isinstance(cause, OdfError | GraphQLError):
            _log.error("GraphQL field %s failed", failed.path, exc_info=cause)
    return web.json_response(result.formatted)


def _is_mutation(document: DocumentNode, operation: str | None) -> bool:
    chosen = get_operation_ast(document, operation)
    return chosen is not None and chosen.operation == OperationType.MUTATION


def _context(request: web.Request) -> Context:
    state = context.state(request)
    policies = state.policies
    assert policies is not None, "a served app's state has its policy cache"
    visible = context.visible(request)
    caller = Caller(
        state.principal(request),
        state.policy(request),
        visible,
        reload=lambda: policies.policy(state.datasets.reader),
    )
    return Context(
        node=context.node(request),
        visible=visible,
        public=lambda record: caller.policy.decide(ANONYMOUS, Action.READ, record.alias).allowed,
        limits=context.limits(request),
        summaries=request.app[SUMMARIES_KEY],
        throttle=request.app[THROTTLE_KEY],
        caller=caller,
    )


async def _graphql_request(
    request: web.Request,
) -> tuple[str, dict[str, Any] | None, str | None]:
    """``query``, ``variables`` and ``operationName``: from a JSON body, or from a GET's
    parameters (``variables`` as JSON text)."""
    if request.method == "GET":
        fields: dict[str, Any] = dict(request.query)
        if "variables" in fields:
            fields["variables"] = _json(fields["variables"], "the variables parameter")
    else:
        fields = _json(await request.text(), "the request body")
        if not isinstance(fields, dict):
            raise BadGraphQLRequest("the request body is not a JSON object")
    query = fields.get("query")
    if not isinstance(query, str) or not query.strip():
        raise BadGraphQLRequest('the request has no query: send {"query": "{ ... }"}')
    variables = fields.get("variables")
    if variables is not None and not isinstance(variables, dict):
        raise BadGraphQLRequest("variables must be a JSON object")
    operation = fields.get("operationName")
    if operation is not None and not isinstance(operation, str):
        raise BadGraphQLRequest("operationName must be a string")
    return query, variables, operation


def _json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise BadGraphQLRequest(f"{what} is not JSON: {error}") from None
