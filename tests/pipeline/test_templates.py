"""``${{ … }}`` templates in fetch steps, restating kamu-cli's
``src/infra/core/src/services/ingest/fetch_service/template.rs`` tests."""

from __future__ import annotations

import pytest

from odfd.ingest.template import TemplateError, render

ENV = {"test1": "val1", "test2": "val2", "with-dash": "dashed"}


def test_template_string() -> None:
    """``test_template_string``: several variables; a missing one fails naming it; a default."""
    assert render("${{ env.test1 }}, ${{ env.test2 || 'default2' }}", "f", ENV) == "val1, val2"
    with pytest.raises(
        TemplateError, match=r"fetch\.url: environment variable missing_var is not set"
    ):
        render("${{ env.test1 }}, ${{ env.missing_var }}", "fetch.url", ENV)
    assert render("foo=${{ env.test3 || 'default-val3' }}", "f", ENV) == "foo=default-val3"
    assert render("${{env.with-dash}}", "f", ENV) == "dashed"


def test_template_string_numbers() -> None:
    """``test_template_string_numbers``: numeric defaults; a bare word is refused."""
    assert render("${{ env.test9 || 123 }}", "f", {}) == "123"
    assert render("${{ env.test9 || -123 }}", "f", {}) == "-123"
    assert render("${{ env.test9 || 0.5 }}", "f", {}) == "0.5"
    with pytest.raises(TemplateError, match="'qwe1' in template"):
        render("X=${{ env.test9 || qwe1 }}", "f", {})


def test_template_string_strings_and_multiple_options() -> None:
    """``test_template_string_strings`` and ``test_template_string_multiple_options``."""
    assert render("${{ env.x || '\"random str __%.?' }}\"", "f", {}) == '"random str __%.?"'
    assert render("${{ env.nope || env.test1 || 'x' }}", "f", ENV) == "val1"
    assert render("${{ env.nope || env.test1 }}", "f", ENV) == "val1"
    with pytest.raises(TemplateError, match="nope or other is not set"):
        render("${{ env.nope || env.other }}", "f", ENV)
    assert render("no templates here", "f", {}) == "no templates here"


def test_config_values_of_a_source_resource() -> None:
    """``config.NAME`` reads the values a ``Source`` brings in; outside one it is not allowed."""
    config = {"apiKey": "k1", "startDate": "2024-01-01"}
    text = "https://x/?d=${{ config.startDate }}&k=${{ config.apiKey }}"
    assert render(text, "f", {}, config) == "https://x/?d=2024-01-01&k=k1"
    assert render("${{ config.nope || env.test1 }}", "f", ENV, config) == "val1"
    with pytest.raises(TemplateError, match=r"^f: config value nope is not set"):
        render("${{ config.nope }}", "f", {}, config)
    with pytest.raises(TemplateError, match=r"'config.apiKey' in template .* is not env.NAME, a"):
        render("${{ config.apiKey }}", "f", {})
