"""Manifests of the synthetic datasets the benchmarks create (imported by ``scripts/bench_*.py``,
which run with this folder first on ``sys.path``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import yaml


def csv_root_snapshot(name: str, columns: Mapping[str, str]) -> str:
    """A root ``DatasetSnapshot`` fed by pushed CSV files with a header row and ``columns``
    (name -> ODF type name, in file order), merged by Append."""
    document = {
        "kind": "DatasetSnapshot",
        "version": 1,
        "content": {
            "name": name,
            "kind": "Root",
            "metadata": [
                {
                    "kind": "AddPushSource",
                    "sourceName": "default",
                    "read": {
                        "kind": "Csv",
                        "header": True,
                        "schema": {
                            "fields": [
                                {"name": column, "type": kind} for column, kind in columns.items()
                            ]
                        },
                    },
                    "merge": {"kind": "Append"},
                }
            ],
        },
    }
    return yaml.safe_dump(document, sort_keys=False)


def sql_derivative_snapshot(
    name: str, inputs: Mapping[str, str | None], queries: Sequence[tuple[str | None, str]]
) -> str:
    """A derivative ``DatasetSnapshot`` running Spark SQL ``queries`` (step alias or ``None`` for
    the output, query) over ``inputs`` (dataset reference -> alias, ``None`` for its name)."""
    document = {
        "kind": "DatasetSnapshot",
        "version": 1,
        "content": {
            "name": name,
            "kind": "Derivative",
            "metadata": [
                {
                    "kind": "SetTransform",
                    "inputs": [
                        {"datasetRef": ref} | ({"alias": alias} if alias else {})
                        for ref, alias in inputs.items()
                    ],
                    "transform": {
                        "kind": "Sql",
                        "engine": "spark",
                        "queries": [
                            ({"alias": alias} if alias else {}) | {"query": query}
                            for alias, query in queries
                        ],
                    },
                }
            ],
        },
    }
    return yaml.safe_dump(document, sort_keys=False)
