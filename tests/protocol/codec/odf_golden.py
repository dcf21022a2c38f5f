"""Golden blocks from the reference's serde tests (src/odf/metadata/tests), rebuilt from their facts."""

from __future__ import annotations

import base64

from protocol.identity import DatasetId, DatasetRef, Multihash
from protocol.model import (
    AddData,
    CompressionFormat,
    DataField,
    DataSchema,
    DataSlice,
    DataTypeInt32,
    DataTypeList,
    DataTypeOption,
    DataTypeString,
    DataTypeUInt64,
    EventTimeSourceFromMetadata,
    ExecuteTransform,
    ExecuteTransformInput,
    ExtraAttributes,
    FetchStepFilesGlob,
    MergeStrategyLedger,
    MetadataBlock,
    MetadataEvent,
    OffsetInterval,
    PrepStepDecompress,
    ReadStepGeoJson,
    SetDataSchema,
    SetPollingSource,
    SetTransform,
    SourceCachingForever,
    SourceOrdering,
    SourceState,
    Timestamp,
    TransformInput,
    TransformSql,
)


def sha3(data: bytes) -> Multihash:
    return Multihash.from_digest_sha3_256(data)


NOON_2020 = Timestamp.of(2020, 1, 1, 12, 0, 0)


def polling_source(read: ReadStepGeoJson) -> SetPollingSource:
    return SetPollingSource(
        fetch=FetchStepFilesGlob(
            path="./*.csv",
            event_time=EventTimeSourceFromMetadata(),
            cache=SourceCachingForever(),
            order=SourceOrdering.BY_NAME,
        ),
        prepare=(PrepStepDecompress(format=CompressionFormat.GZIP),),
        read=read,
        preprocess=TransformSql(engine="spark", version="1.0.0", query="SELECT * FROM input"),
        merge=MergeStrategyLedger(primary_key=("a",)),
    )


def data_slice(logical: bytes, physical: bytes, start: int, end: int, size: int) -> DataSlice:
    return DataSlice(
        logical_hash=sha3(logical),
        physical_hash=sha3(physical),
        offset_interval=OffsetInterval(start=start, end=end),
        size=size,
    )


PUSH_STATE = SourceState(source_name="push-source-1", kind="kamu/kafka-offset", value="SOME_OFFSET")


def execute_transform() -> ExecuteTransform:
    return ExecuteTransform(
        query_inputs=(
            ExecuteTransformInput(
                dataset_id=DatasetId.new_seeded(b"input1"),
                prev_block_hash=sha3(b"a"),
                new_block_hash=sha3(b"b"),
                prev_offset=9,
                new_offset=20,
            ),
            ExecuteTransformInput(
                dataset_id=DatasetId.new_seeded(b"input2"),
                prev_block_hash=sha3(b"a"),
                new_block_hash=sha3(b"b"),
            ),
        ),
        prev_checkpoint=sha3(b"checkpoint"),
        prev_offset=9,
        new_data=data_slice(b"foo", b"bar", 10, 19, 10),
        new_watermark=NOON_2020,
    )


def stability_events() -> list[tuple[MetadataEvent, str]]:
    """``get_test_events`` of test_serde_flatbuffers.rs with the SHA3-256 of each wrapped block."""
    return [
        (AddData(), "a93874702479f83ddff1e7a660ca78085def333c86501b0d895fa3aec79c7189"),
        (
            AddData(prev_checkpoint=sha3(b"prev"), prev_offset=9),
            "86aeb7dee0502b4886761de5e45b5111c0bc9e0fbfee02e3685487109305ef56",
        ),
        (
            AddData(prev_checkpoint=sha3(b"prev"), prev_offset=9, new_watermark=NOON_2020),
            "d1b412dab2a6af53f3e1b183834557bbf1c4689e2fc9b92fc0d04741ef607ecc",
        ),
        (
            AddData(
                prev_checkpoint=sha3(b"prev"),
                prev_offset=9,
                new_data=data_slice(b"logical", b"physical", 10, 99, 100),
                new_watermark=NOON_2020,
            ),
            "1fcf10cb843746c4c44e6c288e216995701aa073426fc4bebe14f1680f8ec6d1",
        ),
        (
            polling_source(ReadStepGeoJson(ddl_schema=("a: INT", "b: INT"))),
            "eb61498b7362d334131a8486a5ce4cc2638d7c1aa3e4da82a19cf834a77df718",
        ),
        (
            polling_source(
                ReadStepGeoJson(
                    schema=DataSchema(
                        fields=(
                            DataField(name="a", type=DataTypeInt32()),
                            DataField(name="b", type=DataTypeInt32()),
                        )
                    )
                )
            ),
            "f96c90e9e9700819ba05d87f66b200a18a08404706ac62cde6d68bc350e73861",
        ),
        (
            AddData(
                prev_checkpoint=sha3(b"checkpoint"),
                prev_offset=9,
                new_data=data_slice(b"logical", b"physical", 10, 99, 100),
                new_source_state=PUSH_STATE,
            ),
            "9326dc5daab04877a9f006ff6b1636a8fa9dcec9615b54f741a1a90091eaf694",
        ),
        (
            AddData(
                prev_checkpoint=sha3(b"checkpoint"),
                prev_offset=9,
                new_data=data_slice(b"logical", b"physical", 10, 99, 100),
                new_source_state=PUSH_STATE,
                # LinkedObjectsSummary { num_objects_naive: 10, size_naive: 100 } as the reference stores it
                extra=ExtraAttributes(
                    {"opendatafabric.org/linkedObjects": {"numObjectsNaive": 10, "sizeNaive": 100}}
                ),
            ),
            "54f64c642cca6f67416ebe2b29e5d9414ece91f819efe97cd437fbe542c61bbb",
        ),
        (
            SetTransform(
                inputs=(
                    TransformInput(
                        dataset_ref=DatasetRef.parse(str(DatasetId.new_seeded(b"input1"))),
                        alias="input1",
                    ),
                    TransformInput(dataset_ref=DatasetRef.parse("input2"), alias="input2"),
                ),
                transform=TransformSql(
                    engine="spark", query="SELECT * FROM input1 UNION ALL SELECT * FROM input2"
                ),
            ),
            "bb6aa1f9689b794c75affa709ae2477b209411d9ad092c2318ecd9ea94121bcc",
        ),
        (execute_transform(), "21cab7396525e614beeafe21c05a38bf597a39a191cc14147b9c5ec32210cf82"),
    ]


def wrap(event: MetadataEvent, sequence_number: int = 117) -> MetadataBlock:
    """``wrap_into_block`` of the reference's tests."""
    return MetadataBlock(
        system_time=NOON_2020,
        prev_block_hash=sha3(b"prev"),
        sequence_number=sequence_number,
        event=event,
    )


def extended_schema() -> DataSchema:
    """The schema of ``serde_set_data_schema`` with its extension attributes as the reference's JSON."""
    return DataSchema(
        fields=(
            DataField(
                name="city",
                type=DataTypeString(),
                extra=ExtraAttributes(
                    {"arrow.apache.org/bufferEncoding": {"kind": "View", "offsetBitWidth": 32}}
                ),
            ),
            DataField(name="population", type=DataTypeUInt64()),
            DataField(
                name="census",
                type=DataTypeOption(inner=DataTypeString()),
                extra=ExtraAttributes(
                    {
                        "opendatafabric.org/type": {
                            "kind": "ObjectLink",
                            "linkType": {"kind": "Multihash"},
                        }
                    }
                ),
            ),
            DataField(name="links", type=DataTypeList(item_type=DataTypeString())),
        ),
        extra=ExtraAttributes({"kamu.dev/archetype": "Collection"}),
    )


SET_DATA_SCHEMA_HASH = "80865248519d55fa04598e24ba42884728efe70956e640dca4df5ec8043c69ca"

LEGACY_ARROW_SCHEMA = base64.b64decode(
    "DAAAAAgACAAAAAQACAAAAAQAAAACAAAAQAAAAAQAAADY////GAAAAAwAAAAAAAAGEAAAAAAAAAAEAAQABAAAAAEAAABiAAAAEAAUABAA"
    "AAAPAAQAAAAIABAAAAAYAAAAIAAAAAAAAAIcAAAACAAMAAQACwAIAAAAQAAAAAAAAAEAAAAAAQAAAGEAAAA="
)
"""Arrow schema {a: Int64 not null, b: Boolean not null} as arrow-rs serialises it (test_serde_yaml.rs)."""

SET_DATA_SCHEMA_LEGACY_HASH = "a7e79d088ca7bac689f12d71ae64b93e7bab62a7db2fec83ea89e9bf90dd89ed"

LEGACY_SET_DATA_SCHEMA = SetDataSchema(raw_arrow_schema=LEGACY_ARROW_SCHEMA)
