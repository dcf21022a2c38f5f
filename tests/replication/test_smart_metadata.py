"""The metadata answer's fast reading (``odfd.sync.transport.smart_metadata``): it must accept
exactly what ``json.loads`` and the message's ``from_json`` accept, with the same bytes, and
leave every other text to them."""

from __future__ import annotations

import json
import os

import pytest

from odfd.sync.transport.smart_metadata import metadata_response, read_metadata_text
from protocol.transfer.smart import messages as m


def _slow(text: str) -> m.DatasetMetadataPullResponse:
    return m.DatasetMetadataPullResponse.from_json(json.loads(text))


def _fast(text: str) -> tuple[m.DatasetMetadataPullResponse, bool]:
    """The message, and whether the payload was read by the fast path."""
    read = read_metadata_text(text, "test")
    return metadata_response(read), read[1] is not None


def _text(payload_text: str, head: str = '"num_blocks":2,') -> str:
    return (
        '{"blocks":{' + head + '"media_type":"application/tar+gzip","encoding":"raw",'
        '"payload":[' + payload_text + "]}}"
    )


@pytest.mark.parametrize("payload", [b"", b"\0", b"\xff", bytes(range(256)), os.urandom(70_000)])
def test_fast_path_reads_the_bytes_json_does(payload: bytes) -> None:
    text = m.encode(m.DatasetMetadataPullResponse(m.MetadataBlocksBatch(3, payload)))
    message, fast = _fast(text)
    assert fast
    assert message == _slow(text)
    assert message.blocks.payload == payload


@pytest.mark.parametrize(
    "payload_text",
    [
        "1, 2",
        "01,2",
        "1,,2",
        ",1",
        "1,",
        "1,2.0",
        "1,-2",
        "1e2",
        "\u0661,2",
        "1,2]",
        "0001",
        "1000",
        "7,2550",
    ],
)
def test_anything_else_is_left_to_json(payload_text: str) -> None:
    """Spaces are valid JSON (read the slow way, same bytes); the rest fail the same way."""
    text = _text(payload_text)
    try:
        expected: m.DatasetMetadataPullResponse | type[Exception] = _slow(text)
    except (ValueError, m.MessageError) as err:
        expected = type(err)
    try:
        message, fast = _fast(text)
    except (ValueError, m.MessageError) as err:
        assert type(err) is expected or isinstance(err, m.MessageError)
        return
    assert not fast
    assert message == expected


def test_out_of_range_value_is_refused() -> None:
    with pytest.raises(m.MessageError, match="0-255"):
        _fast(_text("1,256"))


def test_a_payload_field_elsewhere_is_not_taken_for_the_batch() -> None:
    """Only the batch's own payload is read fast: a second ``payload`` array that ends the
    text, in another object, leaves the message to ``json.loads``."""
    text = (
        '{"blocks":{"num_blocks":1,"media_type":"m","encoding":"raw","payload":[7]},'
        '"other":{"payload":[1,2]}}'
    )
    message, fast = _fast(text)
    assert not fast
    assert message.blocks.payload == b"\7"


def test_missing_fields_fail_as_before() -> None:
    with pytest.raises(m.MessageError, match="num_blocks"):
        _fast(_text("1,2", head=""))
