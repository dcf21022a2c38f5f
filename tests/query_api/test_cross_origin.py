"""A web page served from another origin calls the query API from the browser, as a notebook or
dashboard does (the reference's api-server allows any origin): headless Chromium runs the page's
``fetch``, preflight included (a JSON body with a token), and reads the answer and an error.
Routes outside the data API (the transfer protocols) still give other origins nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.console.browser import Browser
from tests.query_api.conftest import READ_TOKEN, Served
from tests.query_api.datasets import POPULATION, PRIVATE

FETCH = """
const [url, init, done] = arguments;
fetch(url, init).then(
  async (response) => done({status: response.status, body: await response.json()}),
  (error) => done({failed: String(error)}),
);
"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    opened = Browser()
    try:
        yield opened
    finally:
        opened.close()


def _fetch(browser: Browser, url: str, init: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = browser.driver.execute_async_script(FETCH, url, init)
    return result


def test_a_page_of_another_origin_reads_the_query_api(browser: Browser, served: Served) -> None:
    port = urlsplit(served.url).port
    browser.open(f"http://localhost:{port}/info")  # the page's origin: localhost, not 127.0.0.1
    api = f"http://127.0.0.1:{port}"
    query = {"query": f'select count(*) as n from "{PRIVATE}"'}
    init = {
        "method": "POST",
        "headers": {"Content-Type": "application/json", "Authorization": f"Bearer {READ_TOKEN}"},
        "body": json.dumps(query),
    }
    answer = _fetch(browser, f"{api}/query", init)
    assert answer == {
        "status": 200,
        "body": {"output": {"data": [{"n": 2}], "dataFormat": "JsonAoS"}},
    }
    tail = _fetch(browser, f"{api}/{POPULATION}/tail?limit=1", {})
    assert tail["status"] == 200 and {"offset", "city"} <= set(tail["body"]["data"][0])
    refused = _fetch(browser, f"{api}/query?query=selec", {})
    assert refused["status"] == 400 and "sql parser error" in refused["body"]["message"]
    # The transfer protocol is not the data API: the browser keeps its answer from the page.
    blocked = _fetch(browser, f"{api}/{POPULATION}/refs/head", {})
    assert "failed" in blocked, blocked
