"""Query requests as the reference's /query and /verify read them (query_types.rs,
verify_types.rs): names, defaults, aliases, implications and refusals."""

from __future__ import annotations

import pytest

from protocol.identity import DatasetId, Multihash
from protocol.query import (
    DataFormat,
    DatasetState,
    Include,
    QueryDialect,
    QueryRequest,
    RequestError,
    SchemaFormat,
    VerifyRequest,
)


def test_defaults() -> None:
    request = QueryRequest.from_json_body(b'{"query": "select 1"}')
    assert request == QueryRequest("select 1")
    assert request.query_dialect is QueryDialect.SQL_DATAFUSION
    assert request.data_format is DataFormat.JSON_AOS
    assert (request.include, request.schema_format, request.datasets) == (frozenset(), None, None)
    assert (request.skip, request.limit) == (0, 100)
    assert request.to_json() == {
        "query": "select 1",
        "queryDialect": "SqlDataFusion",
        "dataFormat": "JsonAoS",
        "include": [],
        "skip": 0,
        "limit": 100,
    }


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("JsonAoS", DataFormat.JSON_AOS),
        ("jsonaos", DataFormat.JSON_AOS),
        ("json-aos", DataFormat.JSON_AOS),
        ("JsonAos", DataFormat.JSON_AOS),
        ("json-soa", DataFormat.JSON_SOA),
        ("JsonSoa", DataFormat.JSON_SOA),
        ("jsonaoa", DataFormat.JSON_AOA),
    ],
)
def test_data_format_aliases(spelling: str, expected: DataFormat) -> None:
    """test_data_query_handler_data_formats asks for ``json-aos``, ``json-soa``, ``json-aoa``."""
    request = QueryRequest.from_json({"query": "q", "dataFormat": spelling})
    assert request.data_format is expected
    assert request.to_json()["dataFormat"] == expected.value


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        ("odf-json", SchemaFormat.ODF_JSON),
        ("odf-yaml", SchemaFormat.ODF_YAML),
        ("arrow-json", SchemaFormat.ARROW_JSON),
        ("ArrowJson", SchemaFormat.ARROW_JSON),
        ("parquet", SchemaFormat.PARQUET),
        ("parquet-json", SchemaFormat.PARQUET_JSON),
    ],
)
def test_schema_format_aliases(spelling: str, expected: SchemaFormat) -> None:
    """test_data_query_handler_schema_formats: the spellings it sends in the query string."""
    request = QueryRequest.from_query_params([("query", "q"), ("schemaFormat", spelling)])
    assert request.schema_format is expected


def test_include_spellings_and_order() -> None:
    request = QueryRequest.from_json({"query": "q", "include": ["schema", "Proof", "proof"]})
    assert request.include == {Include.SCHEMA, Include.PROOF}
    assert request.to_json()["include"] == ["Proof", "Schema"]
    with pytest.raises(RequestError, match=r"include\[0\]: unknown variant `INPUT`"):
        QueryRequest.from_json({"query": "q", "include": ["INPUT"]})
    from_get = QueryRequest.from_query_params([("query", "q"), ("include", "INPUT,schema")])
    assert from_get.include == {Include.INPUT, Include.SCHEMA}
    assert QueryRequest.from_query_params([("query", "q"), ("include", "")]).include == set()


def test_implications() -> None:
    """A proof needs the input; a schema format asks for the schema (query_handler.rs)."""
    proof = QueryRequest("q", include=frozenset({Include.PROOF}))
    assert proof.with_implications().include_list == [Include.INPUT, Include.PROOF]
    assert proof.answer_schema_format is None
    formatted = QueryRequest("q", schema_format=SchemaFormat.ODF_YAML)
    assert formatted.with_implications().include == {Include.SCHEMA}
    assert formatted.answer_schema_format is SchemaFormat.ODF_YAML
    schema_only = QueryRequest("q", include=frozenset({Include.SCHEMA}))
    assert schema_only.answer_schema_format is SchemaFormat.ARROW_JSON
    state = DatasetState(DatasetId.new_seeded(b"d"), "a/b", Multihash.from_digest_sha3_256(b"x"))
    echo = schema_only.echo([state]).to_json()
    assert echo["schemaFormat"] == "ArrowJson"
    assert echo["datasets"] == [state.to_json()]
    assert echo["include"] == ["Schema"]
    reproduced = QueryRequest.from_json(proof.echo([state]).to_json()).to_reproduce()
    assert reproduced.include == frozenset() and reproduced.datasets == (state,)


def test_get_parameters() -> None:
    """QueryParams: ``format`` aliases ``dataFormat``; numbers are decimal text."""
    request = QueryRequest.from_query_params(
        [("query", "select 1"), ("format", "json-aoa"), ("skip", "5"), ("limit", "1")]
    )
    assert (request.data_format, request.skip, request.limit) == (DataFormat.JSON_AOA, 5, 1)
    with pytest.raises(RequestError, match="missing field `query`"):
        QueryRequest.from_query_params([("limit", "1")])
    with pytest.raises(RequestError, match="unknown field `datasets`"):
        QueryRequest.from_query_params([("query", "q"), ("datasets", "x")])
    with pytest.raises(RequestError, match="duplicate field `dataFormat`"):
        QueryRequest.from_query_params([("query", "q"), ("format", "JsonAoS"), ("dataFormat", "x")])
    with pytest.raises(RequestError, match=r"^limit: invalid digit"):
        QueryRequest.from_query_params([("query", "q"), ("limit", "-1")])
    with pytest.raises(RequestError, match=r"^skip: number too large"):
        QueryRequest.from_query_params([("query", "q"), ("skip", "1" * 21)])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{}", "missing field `query`"),
        (b'{"query": 1}', r"^query: invalid type: integer `1`, expected a string"),
        (b'{"query": "q", "foo": 1}', r"^foo: unknown field `foo`, expected one of `query`"),
        (b'{"query": "q", "skip": -1}', r"^skip: invalid value: integer `-1`, expected u64"),
        (b'{"query": "q", "limit": 1.5}', r"^limit: invalid type: floating point `1.5`"),
        (b'{"query": "q", "limit": 18446744073709551616}', r"^limit: invalid type: floating"),
        (b'{"query": "q", "queryDialect": "sqldatafusion"}', "unknown variant `sqldatafusion`"),
        (b'{"query": "q", "dataFormat": null}', r"^dataFormat: invalid type: null"),
        (b'{"query": "q", "datasets": [{"id": "x", "alias": "a"}]}', r"^datasets\[0\]\.id: "),
        (
            b'{"query": "q", "datasets": [{"id": "did:odf:fed01", "alias": "a"}]}',
            r"^datasets\[0\]\.id: ",
        ),
        (b'{"query": "q", "datasets": [{"alias": "a"}]}', r"^datasets\[0\]: missing field `id`"),
        (
            b'{"query": "q", "datasets": [{"id": "did:odf:x", "alias": "a", "extra": 1}]}',
            r"datasets\[0\]\.extra: unknown field",
        ),
        (b'{"query": "q", "query": "r"}', "duplicate field `query`"),
        (b'{"query": NaN}', "NaN is not a JSON value"),
        (b'{"query": "\\ud800"}', "lone surrogate"),
        (b"\xef\xbb\xbf{}", "BOM"),
        (b"\xff", "not UTF-8"),
        (b'{"query": "q"', "line 1"),
        (b"[" * 200 + b"]" * 200, "recursion limit exceeded"),
    ],
)
def test_bad_bodies_name_the_problem(body: bytes, message: str) -> None:
    with pytest.raises(RequestError, match=message):
        QueryRequest.from_json_body(body)


def test_nulls_of_optional_fields_are_absent() -> None:
    request = QueryRequest.from_json({"query": "q", "schemaFormat": None, "datasets": None})
    assert request.to_json() == QueryRequest("q").to_json()


def test_datasets_round_trip_canonically() -> None:
    """Ids and hashes in any multibase are written back in their canonical forms (the input
    hash is taken over the typed request, as the reference's is)."""
    dataset = DatasetId.new_seeded(b"d")
    block = Multihash.from_digest_sha3_256(b"b")
    request = QueryRequest.from_json(
        {
            "query": "q",
            "datasets": [
                {"id": dataset.to_did_string(), "alias": "x", "blockHash": block.to_multibase()},
                {"id": str(dataset), "alias": "y", "blockHash": None},
            ],
        }
    )
    assert request.to_json()["datasets"] == [
        {"id": str(dataset), "alias": "x", "blockHash": str(block)},
        {"id": str(dataset), "alias": "y"},
    ]


def test_verify_request_refuses_an_output() -> None:
    """verify_types.rs: a verify request is an answer without its output (unknown fields are
    refused); every part is required."""
    with pytest.raises(RequestError, match="unknown field `output`"):
        VerifyRequest.from_json_body(
            b'{"input": {"query": "q"}, "output": {}, "subQueries": [], "commitment": {},'
            b' "proof": {}}'
        )
    with pytest.raises(RequestError, match="missing field `subQueries`"):
        VerifyRequest.from_json({"input": {"query": "q"}, "commitment": {}, "proof": {}})
    with pytest.raises(RequestError, match=r"^proof: missing field `type`"):
        VerifyRequest.from_json(
            {
                "input": {"query": "q"},
                "subQueries": [],
                "commitment": {
                    "inputHash": str(Multihash.from_digest_sha3_256(b"i")),
                    "outputHash": str(Multihash.from_digest_sha3_256(b"o")),
                    "subQueriesHash": str(Multihash.from_digest_sha3_256(b"s")),
                },
                "proof": {},
            }
        )
