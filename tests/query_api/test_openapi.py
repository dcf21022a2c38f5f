"""The query API against its own ``/openapi.json``, with schemathesis (a maintained OpenAPI
tester): requests generated from the document, every answer checked against it (no server
error, documented status codes, content types and bodies). A handler that crashes on odd input
or answers something the document does not say fails here."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from schemathesis.openapi import from_url
from schemathesis.specs.openapi.checks import positive_data_acceptance

from odfd.server.ingest_api import INGEST_ROUTE
from odfd.server.query_api import DATASET_ROUTES, ROOT_ROUTES
from odfd.server.resource_api import ROUTES as RESOURCE_ROUTES
from odfd.server.upload_api import ROUTES as UPLOAD_ROUTES
from tests.query_api.conftest import Served

EXAMPLES = 10
VERIFY_EXAMPLES = 3
"""Generating a verify request (sub-queries nest) takes ~1 s of Hypothesis's time each."""
ROUTED = {(method, path) for method, path, _ in ROOT_ROUTES if path != "/openapi.json"} | {
    (method, path)
    for method, name in [*((m, n) for m, n, _ in DATASET_ROUTES), INGEST_ROUTE]
    for path in (f"/{{dataset}}/{name}", f"/{{account}}/{{dataset}}/{name}")
}
ROUTED |= set(RESOURCE_ROUTES) | set(UPLOAD_ROUTES)
"""The operations schemathesis tests (all but the document itself)."""


def _operations(served: Served) -> list[Any]:
    schema = from_url(served.url + "openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


def test_answers_match_the_document(served: Served) -> None:
    """Each operation, with generated requests; schemathesis's default checks."""
    base_url = served.url.rstrip("/")
    operations = _operations(served)
    assert len(operations) == len(ROUTED)
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES if operation.label != "POST /verify" else VERIFY_EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any) -> None:
            # SqlSpark would start a JVM for each random string (its own tests run Spark).
            body = case.body if isinstance(case.body, dict) else {}
            assume(
                "SqlSpark" not in ((case.query or {}).get("queryDialect"), body.get("queryDialect"))
            )
            # A schema-valid string is seldom valid SQL: a 400 for it is right, not a failure.
            case.call_and_validate(base_url=base_url, excluded_checks=[positive_data_acceptance])

        check()


def test_the_document_served_is_the_one_in_the_package(served: Served) -> None:
    shipped = json.loads(files("odfd.server.query_api").joinpath("openapi.json").read_text())
    reply = served.call("GET", "/openapi.json")
    assert reply.body == shipped
    assert reply.body["openapi"].startswith("3.1")


def test_every_route_of_the_api_is_documented(served: Served) -> None:
    """The document and the router list the same operations (one per method and path)."""
    documented = {
        (method.upper(), path)
        for path, operations in served.call("GET", "/openapi.json").body["paths"].items()
        for method in operations
    }
    assert documented == ROUTED | {("GET", "/openapi.json")}
