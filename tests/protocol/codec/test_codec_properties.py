"""Round trips of generated blocks of every event type through YAML, FlatBuffers and JSON."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.codec import json as odf_json
from protocol.codec import yaml as odf_yaml
from protocol.codec.flatbuffers import decode_block, encode_block
from protocol.model import METADATA_EVENT_TYPES, UNION_VARIANTS, MetadataBlock, Timestamp
from tests.protocol.codec.odf_strategies import multihashes, of_type

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def blocks_with(event_type: type) -> st.SearchStrategy:
    return st.builds(
        MetadataBlock,
        system_time=st.integers(0, 2**62).map(Timestamp),
        prev_block_hash=st.none() | multihashes,
        sequence_number=st.integers(0, 2**64 - 1),
        event=of_type(event_type.__name__),
    )


@pytest.mark.parametrize("event_type", METADATA_EVENT_TYPES, ids=lambda t: t.__name__)
@SETTINGS
@given(data=st.data())
def test_yaml_flatbuffers_yaml_round_trip(event_type: type, data: st.DataObject) -> None:
    block = data.draw(blocks_with(event_type))
    text = odf_yaml.dump_block(block)
    from_yaml = odf_yaml.load_block(text)
    assert from_yaml == block
    binary = encode_block(from_yaml)
    from_binary = decode_block(binary)
    assert from_binary == block
    assert encode_block(from_binary) == binary
    assert odf_yaml.dump_block(from_binary) == text


@pytest.mark.parametrize("event_type", METADATA_EVENT_TYPES, ids=lambda t: t.__name__)
@SETTINGS
@given(data=st.data())
def test_json_round_trip(event_type: type, data: st.DataObject) -> None:
    block = data.draw(blocks_with(event_type))
    assert odf_json.load_block(odf_json.dump_block(block)) == block


UNION_MEMBERS = [
    (union, variant) for union, variants in UNION_VARIANTS.items() for variant in variants
]


@pytest.mark.parametrize(
    ("union", "variant"), UNION_MEMBERS, ids=lambda v: v if isinstance(v, str) else v.__name__
)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_union_variant_round_trips_as_text(
    union: str, variant: type, data: st.DataObject
) -> None:
    value = data.draw(of_type(variant.__name__))
    assert odf_yaml.loads(odf_yaml.dumps(value), union) == value
    assert odf_json.loads(odf_json.dumps(value), union) == value
