"""The reference api-server's tests (kamu-cli ``src/adapter/http/tests/tests/test_data_query.rs``,
``test_node_info.rs``, ``test_dataset_info.rs``, ``test_account_info.rs``) restated against a
real odfd server: their requests, expected bodies and status codes, and the reference's own
published answers, which odfd must check byte for byte."""

from __future__ import annotations

import copy
from typing import Any

from protocol.identity import DatasetId, Multihash
from tests.protocol.query.test_golden_vectors import (
    DATASET_ID,
    DID,
    PROOF_ONLY,
    ROWS,
    WITH_SCHEMA,
)
from tests.query_api import verifier
from tests.query_api.conftest import PUSH_TOKEN, Served
from tests.query_api.datasets import POPULATION

QUERY = f'select offset, city, population from "{POPULATION}" order by offset desc'


def _arrow_field(name: str, data_type: Any) -> dict[str, Any]:
    return {
        "name": name,
        "data_type": data_type,
        "nullable": False,
        "dict_id": 0,
        "dict_is_ordered": False,
        "metadata": {},
    }


TIMESTAMP = {"Timestamp": ["Millisecond", "UTC"]}
TAIL_SCHEMA = {
    "fields": [
        _arrow_field("offset", "Int64"),
        _arrow_field("op", "Int32"),
        _arrow_field("system_time", TIMESTAMP),
        _arrow_field("event_time", TIMESTAMP),
        _arrow_field("city", "Utf8"),
        _arrow_field("population", "UInt64"),
    ],
    "metadata": {},
}
ROW_A = {
    "city": "A",
    "event_time": "2050-01-01T12:00:00Z",
    "offset": 0,
    "op": 0,
    "population": 100,
    "system_time": "2050-01-01T12:00:00Z",
}
ROW_B = {**ROW_A, "city": "B", "offset": 1, "population": 200}


def _head(served: Served) -> str:
    return str(served.run(served.node.workspace.resolve(POPULATION)).head)


def _id(served: Served) -> str:
    return str(served.run(served.node.workspace.resolve(POPULATION)).id)


def test_data_tail_handler(served: Served) -> None:
    reply = served.call("GET", f"/{POPULATION}/tail?schemaFormat=ArrowJson")
    assert reply.status == 200
    assert reply.body == {
        "dataFormat": "JsonAoS",
        "data": [ROW_A, ROW_B],
        "schemaFormat": "ArrowJson",
        "schema": TAIL_SCHEMA,
    }
    limited = served.call("GET", f"/{POPULATION}/tail?limit=1")
    assert limited.body == {"dataFormat": "JsonAoS", "data": [ROW_B]}
    skipped = served.call("GET", f"/{POPULATION}/tail?skip=1")
    assert skipped.body == {"dataFormat": "JsonAoS", "data": [ROW_A]}


def test_tail_keeps_the_schema_order_of_columns_and_query_sorts_them(served: Served) -> None:
    """The reference's tail sends its record writer's text as it is (``tail_handler.rs``: a
    ``RawValue``), keys in schema order; its ``/query`` reads the data into a JSON value first,
    so keys come sorted. The reply is read into ordered dicts, so the order is checked."""
    names = [field["name"] for field in TAIL_SCHEMA["fields"]]
    aos = served.call("GET", f"/{POPULATION}/tail")
    assert [list(row) for row in aos.body["data"]] == [names, names]
    assert list(aos.body) == ["data", "dataFormat"]
    soa = served.call("GET", f"/{POPULATION}/tail?dataFormat=JsonSoA")
    assert list(soa.body["data"]) == names
    assert soa.body["data"]["city"] == ["A", "B"]
    query = served.call("POST", "/query", {"query": f'select * from "{POPULATION}"'})
    assert [list(row) for row in query.body["output"]["data"]] == [sorted(names)] * 2


def test_data_query_handler_success(served: Served) -> None:
    defaults = served.call("POST", "/query", {"query": QUERY})
    assert defaults.status == 200
    assert defaults.body == {"output": {"data": ROWS, "dataFormat": "JsonAoS"}}

    with_input = served.call("POST", "/query", {"query": QUERY, "include": ["input", "schema"]})
    datasets = [{"alias": POPULATION, "blockHash": _head(served), "id": _id(served)}]
    assert with_input.body == {
        "input": {
            "include": ["Input", "Schema"],
            "query": QUERY,
            "queryDialect": "SqlDataFusion",
            "dataFormat": "JsonAoS",
            "schemaFormat": "ArrowJson",
            "skip": 0,
            "limit": 100,
            "datasets": datasets,
        },
        "output": {
            "data": ROWS,
            "dataFormat": "JsonAoS",
            "schema": WITH_SCHEMA["output"]["schema"],  # type: ignore[index]
            "schemaFormat": "ArrowJson",
        },
    }

    proved = served.call("POST", "/query", {"query": QUERY, "include": ["schema", "proof"]})
    assert proved.status == 200
    answer = proved.body
    assert answer["input"]["include"] == ["Input", "Proof", "Schema"]
    assert answer["subQueries"] == []
    assert answer["proof"]["verificationMethod"] == DID
    # The same rows and schema as the reference's node: the same output hash.
    assert answer["output"] == WITH_SCHEMA["output"]
    assert answer["commitment"]["outputHash"] == WITH_SCHEMA["commitment"]["outputHash"]  # type: ignore[index]
    verifier.check(answer)


def test_query_with_unknown_dataset_or_block(served: Served) -> None:
    missing = DatasetId.new_seeded(b"does-not-exist")
    reply = served.call(
        "POST", "/query", {"query": QUERY, "datasets": [{"id": str(missing), "alias": POPULATION}]}
    )
    assert reply.status == 404
    assert reply.body == {
        "message": "Dataset not found: "
        "did:odf:fed011ba79f25e520298ba6945dd6197083a366364bef178d5899b100c434748d88e5"
    }
    block = str(Multihash.from_digest_sha3_256(b"does-not-exist"))
    reply = served.call(
        "POST",
        "/query",
        {
            "query": QUERY,
            "datasets": [{"id": _id(served), "alias": POPULATION, "blockHash": block}],
        },
    )
    assert reply.status == 404
    assert block in reply.body["message"]


def test_data_query_handler_sql_errors(served: Served) -> None:
    cases = {
        "select ???": "sql parser error: Expected: end of statement, found: ? at Line: 1, Column: 9",
        "select offset, city, population from does_not_exist": (
            "table 'odf.odf.does_not_exist' not found"
        ),
    }
    for sql, message in cases.items():
        reply = served.call("POST", "/query", {"query": sql})
        assert (reply.status, reply.body) == (400, {"message": message})
    for sql, start in {
        f'select offzet from "{POPULATION}"': "No field named offzet.",
        f'select foobar(offset) from "{POPULATION}"': "Invalid function 'foobar'.",
    }.items():
        reply = served.call("POST", "/query", {"query": sql})
        assert reply.status == 400
        assert reply.body["message"].startswith(start)


def test_data_query_handler_ranges_and_formats(served: Served) -> None:
    base = f'select offset, city from "{POPULATION}" order by offset'
    reply = served.call("GET", f"/query?query={_quote(base)}&skip=1&limit=1&format=json-aoa")
    assert reply.body == {"output": {"data": [[1, "B"]], "dataFormat": "JsonAoA"}}
    reply = served.call("POST", "/query", {"query": base, "dataFormat": "JsonSoA"})
    assert reply.body["output"]["data"] == {"offset": [0, 1], "city": ["A", "B"]}


def test_data_verify_handler(served: Served) -> None:
    answer = served.call("POST", "/query", {"query": QUERY, "include": ["proof"]}).body
    request = {key: value for key, value in answer.items() if key != "output"}
    ok = served.call("POST", "/verify", request)
    assert (ok.status, ok.body) == (200, {"ok": True})

    tampered = copy.deepcopy(request)
    tampered["input"]["query"] = QUERY + " limit 1"
    reply = served.call("POST", "/verify", tampered)
    assert reply.status == 400
    assert reply.body["error"] == {
        "kind": "InvalidRequest::InputHash",
        "message": "The commitment is invalid and cannot be disputed: commitment.inputHash "
        "doesn't match the hash of input object",
    }

    forged = copy.deepcopy(request)
    forged["proof"]["proofValue"] = PROOF_ONLY["proof"]["proofValue"]  # type: ignore[index]
    reply = served.call("POST", "/verify", forged)
    assert reply.status == 400
    assert reply.body["error"]["kind"] == "InvalidRequest::BadSignature"


def test_the_reference_nodes_proofs_check_out_up_to_the_missing_dataset(served: Served) -> None:
    for answer in (PROOF_ONLY, WITH_SCHEMA):
        request = {key: value for key, value in answer.items() if key != "output"}
        reply = served.call("POST", "/verify", request)
        assert reply.status == 400
        assert reply.body["error"]["kind"] == "VerificationFailed::DatasetNotFound"
        assert reply.body["error"]["dataset_id"] == DATASET_ID


def test_metadata_handler_aspects(served: Served) -> None:
    seed = {"datasetId": _id(served), "datasetKind": "Root"}
    reply = served.call("GET", f"/{POPULATION}/metadata")
    assert reply.body == {"output": {"seed": seed}}
    full = served.call(
        "GET", f"/{POPULATION}/metadata?include=attachments,info,license,refs,schema,seed,vocab"
    )
    assert full.body == {
        "output": {
            "attachments": {
                "attachments": {
                    "kind": "Embedded",
                    "items": [{"path": "README.md", "content": "Blah"}],
                }
            },
            "info": {"description": "Test dataset", "keywords": ["foo", "bar"]},
            "license": {
                "name": "apache-2.0",
                "shortName": "apache-2.0",
                "websiteUrl": "https://www.apache.org/licenses/LICENSE-2.0",
            },
            "refs": [{"name": "head", "blockHash": _head(served)}],
            "schema": TAIL_SCHEMA,
            "schemaFormat": "ArrowJson",
            "seed": seed,
            "vocab": {
                "eventTimeColumn": "event_time",
                "offsetColumn": "offset",
                "operationTypeColumn": "op",
                "systemTimeColumn": "system_time",
            },
        }
    }


def test_node_dataset_and_account_info(served: Served) -> None:
    assert served.call("GET", "/info").body == {"isMultiTenant": True, "did": DID}
    info = served.call("GET", f"/datasets/{_id(served)}")
    assert info.body == {
        "id": _id(served),
        "datasetName": "population",
        "owner": {
            "accountName": "kamu-server",
            "accountId": str(DatasetId.new_seeded(b"kamu-server")),
        },
    }
    missing = served.call("GET", f"/datasets/{DatasetId.new_seeded(b'nope')}")
    assert (missing.status, missing.body) == (404, {"message": "Not Found"})
    anonymous = served.call("GET", "/accounts/me")
    assert (anonymous.status, anonymous.body) == (401, {"message": "Unauthenticated"})
    me = served.call("GET", "/accounts/me", token=PUSH_TOKEN)
    assert me.body == {"id": str(DatasetId.new_seeded(b"kamu")), "accountName": "kamu"}


def _quote(text: str) -> str:
    from urllib.parse import quote

    return quote(text, safe="")


def test_query_reads_a_name_with_catalog_and_schema(served: Served) -> None:
    """``odf.odf."alias"`` (the names Flight SQL lists) reads the dataset in ``/query`` too."""
    plain = served.call("POST", "/query", {"query": QUERY})
    qualified = QUERY.replace(f'"{POPULATION}"', f'odf.odf."{POPULATION}"')
    reply = served.call("POST", "/query", {"query": qualified})
    assert reply.status == 200, reply.body
    assert reply.body["output"]["data"] == plain.body["output"]["data"] == ROWS
