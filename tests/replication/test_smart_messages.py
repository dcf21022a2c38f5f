"""The Smart Transfer Protocol's JSON wire form, as kamu-cli's serde derives write it.

Expected texts follow from the reference's message structs (``smart_protocol/messages.rs``):
no ``rename_all``, so snake_case fields; ``Result`` as ``{"Ok"|"Err": …}``; enums externally
tagged (unit variants as strings); ``Vec<u8>`` as an array of numbers; ``Option`` as ``null``;
``Multihash`` as its multibase string; ``DateTime<Utc>`` as RFC 3339.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from protocol.identity import DatasetId, Multihash
from protocol.transfer.smart import messages as m

H1 = Multihash.from_digest_sha3_256(b"one")
H2 = Multihash.from_digest_sha3_256(b"two")
DID = DatasetId.new_seeded(b"\1" * 32)


def wire(message: object) -> Any:
    return json.loads(m.encode(message))


def test_pull_request_and_plan() -> None:
    assert wire(m.DatasetPullRequest(begin_after=H1)) == {
        "begin_after": str(H1),
        "stop_at": None,
        "force_update_if_diverged": False,
    }
    plan = m.TransferPlan(3, 2, 30, 900, 4096)
    assert wire(m.DatasetPullResponse(plan)) == {
        "Ok": {
            "transfer_plan": {
                "num_blocks": 3,
                "num_objects": 2,
                "num_records": 30,
                "bytes_in_raw_blocks": 900,
                "bytes_in_raw_objects": 4096,
            }
        }
    }
    assert m.DatasetPullResponse.from_json(wire(m.DatasetPullResponse(plan))).transfer_plan == plan


def test_errors_are_externally_tagged_results() -> None:
    assert wire(
        m.DatasetPullResponse(error=m.TransferError("InvalidInterval", head=H1, tail=H2))
    ) == {"Err": {"InvalidInterval": {"head": str(H1), "tail": str(H2)}}}
    assert wire(m.Accepted(m.TransferError("InvalidHead", head=None, tail=H2))) == {
        "Err": {"InvalidHead": {"actual_head": None, "expected_head": str(H2)}}
    }
    assert wire(m.Accepted(m.TransferError.internal("Push", "CompleteRequest", "boom"))) == {
        "Err": {"Internal": {"phase": {"Push": "CompleteRequest"}, "error_message": "boom"}}
    }
    assert wire(
        m.DatasetPushObjectsTransferResponse(error=m.TransferError("RefCollision", dataset_id=DID))
    ) == {"Err": {"RefCollision": {"dataset_id": str(DID)}}}
    assert wire(m.Accepted(m.TransferError("SeedBlockOverwriteRestricted"))) == {
        "Err": {"SeedBlockOverwriteRestricted": {}}
    }
    assert wire(m.Accepted()) == {"Ok": {}}
    text = '{"Err":{"NameCollision":{"dataset_alias":"alice/cities"}}}'
    assert m.decode_error(text) == m.TransferError("NameCollision", dataset_alias="alice/cities")
    assert m.decode_error("Client pull flow succeeded") is None


def test_metadata_batch_payload_is_an_array_of_bytes() -> None:
    batch = m.MetadataBlocksBatch(2, b"\x1f\x8b\x00\xff")
    assert wire(m.DatasetMetadataPullResponse(batch)) == {
        "blocks": {
            "num_blocks": 2,
            "media_type": "application/tar+gzip",
            "encoding": "raw",
            "payload": [31, 139, 0, 255],
        }
    }
    assert wire(m.DatasetPushMetadataRequest(batch))["new_blocks"]["payload"] == [31, 139, 0, 255]
    with pytest.raises(m.MessageError, match="payload"):
        m.MetadataBlocksBatch.from_json(
            {"num_blocks": 1, "media_type": "x", "encoding": "raw", "payload": [256]}
        )


@pytest.mark.parametrize(
    "payload", [b"", b"\x00", bytes(range(256)), bytes(range(255, -1, -1)) * 3 + b"\x07"]
)
@pytest.mark.parametrize("media_type", ["application/tar+gzip", 'odd "type" \\ é\n'])
def test_a_batch_message_text_is_what_json_dumps_writes(payload: bytes, media_type: str) -> None:
    batch = m.MetadataBlocksBatch(len(payload), payload, media_type=media_type)
    for message in (m.DatasetMetadataPullResponse(batch), m.DatasetPushMetadataRequest(batch)):
        assert m.encode(message) == json.dumps(message.to_json(), separators=(",", ":"))


def test_object_transfer_messages() -> None:
    file = m.ObjectFileReference("DataSlice", H1, 123)
    expires = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    url = m.TransferUrl("http://node/ds/data/x?sig=1", (("x-odf-smtp-version", "1"),), expires)
    assert wire(m.DatasetPullObjectsTransferRequest((file,))) == {
        "object_files": [{"object_type": "DataSlice", "physical_hash": str(H1), "size": 123}]
    }
    response = m.DatasetPullObjectsTransferResponse((m.PullObjectTransferStrategy(file, url),))
    assert wire(response) == {
        "object_transfer_strategies": [
            {
                "object_file": {"object_type": "DataSlice", "physical_hash": str(H1), "size": 123},
                "pull_strategy": "HttpDownload",
                "download_from": {
                    "url": "http://node/ds/data/x?sig=1",
                    "headers": [{"name": "x-odf-smtp-version", "value": "1"}],
                    "expires_at": "2026-01-02T03:04:05Z",
                },
            }
        ]
    }
    assert m.DatasetPullObjectsTransferResponse.from_json(wire(response)) == response
    push = m.DatasetPushObjectsTransferResponse(
        (m.PushObjectTransferStrategy(m.ObjectFileReference("Checkpoint", H2, 9), "SkipUpload"),)
    )
    assert wire(push) == {
        "Ok": {
            "object_transfer_strategies": [
                {
                    "object_file": {
                        "object_type": "Checkpoint",
                        "physical_hash": str(H2),
                        "size": 9,
                    },
                    "push_strategy": "SkipUpload",
                    "upload_to": None,
                }
            ]
        }
    }
    assert (
        wire(m.DatasetPushObjectsTransferRequest((file,), is_truncated=False))["is_truncated"]
        is False
    )


def test_push_messages() -> None:
    request = m.DatasetPushRequest(None, m.TransferPlan(1, 0, 0, 100, 0))
    assert wire(request) == {
        "current_head": None,
        "transfer_plan": {
            "num_blocks": 1,
            "num_objects": 0,
            "num_records": 0,
            "bytes_in_raw_blocks": 100,
            "bytes_in_raw_objects": 0,
        },
        "force_update_if_diverged": False,
        "visibility_for_created_dataset": "Private",
    }
    assert m.DatasetPushRequest.from_json(wire(request)) == request
    assert wire(m.DatasetPushObjectsUploadProgressResponse(4)) == {
        "details": {"Running": {"uploaded_objects_count": 4}}
    }
    assert wire(m.DatasetPushObjectsUploadProgressResponse()) == {"details": "Complete"}
    assert m.DatasetPushObjectsUploadProgressResponse.from_json({"details": "Complete"}).complete
    for empty in (
        m.DatasetPullMetadataRequest(),
        m.DatasetPushComplete(),
        m.DatasetPushCompleteConfirmed(),
        m.DatasetPushObjectsUploadProgressRequest(),
    ):
        assert wire(empty) == {}


@pytest.mark.parametrize(
    ("parse", "value", "field"),
    [
        (m.DatasetPullRequest.from_json, {"begin_after": "nope"}, "DatasetPullRequest.begin_after"),
        (m.DatasetPullRequest.from_json, [], "DatasetPullRequest"),
        (m.DatasetPullResponse.from_json, {"Ok": {}}, "transfer_plan"),
        (m.DatasetPullResponse.from_json, {"Err": {"Bogus": {}}}, "Err"),
        (
            m.DatasetPullObjectsTransferRequest.from_json,
            {"object_files": [{"object_type": "Block", "physical_hash": str(H1), "size": 1}]},
            "object_type",
        ),
        (
            m.DatasetPullObjectsTransferRequest.from_json,
            {"object_files": [{"object_type": "DataSlice", "physical_hash": str(H1), "size": -1}]},
            "size",
        ),
        (
            m.DatasetPushObjectsTransferResponse.from_json,
            {
                "Ok": {
                    "object_transfer_strategies": [
                        {
                            "object_file": {
                                "object_type": "DataSlice",
                                "physical_hash": str(H1),
                                "size": 1,
                            },
                            "push_strategy": "HttpUpload",
                            "upload_to": None,
                        }
                    ]
                }
            },
            "upload_to",
        ),
    ],
)
def test_malformed_messages_name_the_field(parse, value, field) -> None:
    with pytest.raises(m.MessageError, match=field.replace(".", r"\.")):
        parse(value)
