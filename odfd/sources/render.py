"""A Source's ingress made into the fetch step an ingest runs, its ``${{ config.x }}`` (and
``${{ env.X }}``) templates filled in; and the :class:`Redactor` that takes the secret values
back out of any message about the run.

The rendered step exists only in memory for one run: it is never committed, stored or logged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote, quote_plus

from odfd.app.value_refs import ResolvedValues
from odfd.ingest.template import render
from odfd.sources.spec import SourceDefinition, SourceSpecError
from protocol.codec.tree import from_tree, to_tree
from protocol.errors import DecodeError
from protocol.model import MergeStrategyAppend, SetPollingSource

_FETCH_KIND = {"EvmLogs": "EthereumLogs"}
"""Ingress kinds whose fetch step has another name in the metadata model."""
REDACTED = "***"


def polling_source(source: SourceDefinition, values: ResolvedValues) -> SetPollingSource:
    """The Source as the polling source the ingest coordinator runs (never committed)."""
    assert source.spec.ingress is not None  # SourceDefinition refuses a Source without one
    tree = _render(to_tree(source.spec.ingress), "spec.ingress", values.values)
    tree["kind"] = _FETCH_KIND.get(tree["kind"], tree["kind"])
    try:
        fetch = from_tree(tree, "FetchStep", f"Source {source.name}", "spec.ingress")
    except DecodeError as err:
        raise SourceSpecError("invalid-spec", Redactor(values.secrets).redact(str(err))) from None
    spec = source.spec
    return SetPollingSource(
        fetch=fetch,
        prepare=spec.prepare,
        read=spec.read,
        preprocess=spec.preprocess,
        merge=spec.merge if spec.merge is not None else MergeStrategyAppend(),
    )


def _render(tree: Any, path: str, config: dict[str, str]) -> Any:
    if isinstance(tree, str):
        return render(tree, path, config=config)
    if isinstance(tree, list):
        return [_render(v, f"{path}[{i}]", config) for i, v in enumerate(tree)]
    if isinstance(tree, dict):
        return {k: v if k == "kind" else _render(v, f"{path}.{k}", config) for k, v in tree.items()}
    return tree


class Redactor:
    """Replaces every secret value (as given, and as URLs encode it) by ``***``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        forms = {form for s in secrets if s for form in (s, quote(s, safe=""), quote_plus(s))}
        self._forms = sorted(forms, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for form in self._forms:
            text = text.replace(form, REDACTED)
        return text
