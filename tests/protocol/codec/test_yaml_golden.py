"""Every YAML text of the reference's test_serde_yaml.rs that concerns our model: written and read."""

from __future__ import annotations

import json
import textwrap

import pytest

from protocol.codec import json as odf_json
from protocol.codec import yaml as odf_yaml
from protocol.codec.tree import to_tree
from protocol.errors import DecodeError
from protocol.identity import DatasetAlias, DatasetRef
from protocol.model import (
    CompressionFormat,
    DataField,
    DataSchema,
    DatasetKind,
    DatasetSnapshot,
    DataTypeTimestamp,
    ExtraAttributes,
    FetchStepFilesGlob,
    FetchStepUrl,
    MergeStrategySnapshot,
    MetadataBlock,
    MetadataEvent,
    PrepStepDecompress,
    ReadStepCsv,
    ReadStepNdJson,
    Secret,
    Secrets,
    SetDataSchema,
    SetPollingSource,
    SetTransform,
    SourceCachingForever,
    SourceOrdering,
    SqlQueryStep,
    TemporalTable,
    TimeUnit,
    TransformInput,
    TransformSql,
)
from tests.protocol.codec.odf_golden import (
    LEGACY_SET_DATA_SCHEMA,
    NOON_2020,
    execute_transform,
    extended_schema,
    sha3,
)


def text(value: str) -> str:
    return textwrap.dedent(value).lstrip("\n")


def block(event: MetadataEvent, sequence_number: int) -> MetadataBlock:
    return MetadataBlock(
        system_time=NOON_2020,
        prev_block_hash=sha3(b"prev"),
        sequence_number=sequence_number,
        event=event,
    )


# --- serde_enum_tagging / serde_string_enum_names -------------------------------------------------


def test_union_tags_are_written_pascal_case() -> None:
    assert odf_yaml.dumps(ReadStepNdJson(encoding="utf-8")) == "kind: NdJson\nencoding: utf-8\n"


@pytest.mark.parametrize("tag", ["NdJson", "ndJson", "ndjson"])
def test_union_tags_accept_rfc013_spellings(tag: str) -> None:
    assert odf_yaml.loads(f"kind: {tag}\nencoding: utf-8\n", "ReadStep") == ReadStepNdJson(
        encoding="utf-8"
    )


def test_union_tags_reject_other_spellings() -> None:
    with pytest.raises(DecodeError, match="unknown variant `nDjson`"):
        odf_yaml.loads("kind: nDjson\nencoding: utf-8\n", "ReadStep")


def test_enum_values_are_written_pascal_case() -> None:
    assert odf_yaml.dumps(
        FetchStepFilesGlob(path="a", order=SourceOrdering.BY_EVENT_TIME)
    ).endswith("order: ByEventTime\n")


@pytest.mark.parametrize("value", ["ByEventTime", "byEventTime", "byeventtime"])
def test_enum_values_accept_rfc013_spellings(value: str) -> None:
    step = odf_yaml.loads(f"kind: FilesGlob\npath: a\norder: {value}\n", "FetchStep")
    assert step.order is SourceOrdering.BY_EVENT_TIME


def test_enum_values_reject_other_spellings() -> None:
    with pytest.raises(
        DecodeError, match=r"order: unknown SourceOrdering variant string 'bYeventtime'"
    ):
        odf_yaml.loads("kind: FilesGlob\npath: a\norder: bYeventtime\n", "FetchStep")


# --- test_serde_maps ------------------------------------------------------------------------------


def test_secrets_map_round_trips_with_quoted_scalars() -> None:
    data = text(
        """
        password:
          value: swordfish
        tls:
          value: aabbcc
          contentEncoding: base64
        username:
          value: 'true'
        """
    )
    value = odf_yaml.loads(data, "Secrets")
    assert value == Secrets(
        {
            "password": Secret(value="swordfish"),
            "username": Secret(value="true"),
            "tls": Secret(value="aabbcc", content_encoding="base64"),
        }
    )
    assert odf_yaml.dumps(value) == data


def test_secrets_map_reads_short_form() -> None:
    value = odf_yaml.loads("password: swordfish\n", "Secrets")
    assert value == Secrets({"password": Secret(value="swordfish")})
    assert odf_yaml.dumps(value) == "password:\n  value: swordfish\n"


def test_extra_attributes_round_trip() -> None:
    data = text(
        """
        arrow.apache.org/offsetBitWidth: 32
        opendatafabric.org/description: foobar
        opendatafabric.org/type:
          kind: ObjectLink
          linkType:
            kind: Multihash
        """
    )
    value = odf_yaml.loads(data, "ExtraAttributes")
    assert value == ExtraAttributes(
        {
            "arrow.apache.org/offsetBitWidth": 32,
            "opendatafabric.org/description": "foobar",
            "opendatafabric.org/type": {"kind": "ObjectLink", "linkType": {"kind": "Multihash"}},
        }
    )
    assert odf_yaml.dumps(value) == data


# --- serde_set_data_schema(_legacy) ---------------------------------------------------------------

SET_DATA_SCHEMA_YAML = text(
    """
    kind: MetadataBlock
    version: 3
    content:
      systemTime: 2020-01-01T12:00:00Z
      prevBlockHash: f16209eb949bd8ff0bb1d827f11809aebc6bd0d5955c7f368469a913c70d196620272
      sequenceNumber: 123
      event:
        kind: SetDataSchema
        schema:
          fields:
          - name: city
            type:
              kind: String
            extra:
              arrow.apache.org/bufferEncoding:
                kind: View
                offsetBitWidth: 32
          - name: population
            type:
              kind: UInt64
          - name: census
            type:
              kind: Option
              inner:
                kind: String
            extra:
              opendatafabric.org/type:
                kind: ObjectLink
                linkType:
                  kind: Multihash
          - name: links
            type:
              kind: List
              itemType:
                kind: String
          extra:
            kamu.dev/archetype: Collection
    """
)

SET_DATA_SCHEMA_LEGACY_YAML = text(
    """
    kind: MetadataBlock
    version: 3
    content:
      systemTime: 2020-01-01T12:00:00Z
      prevBlockHash: f16209eb949bd8ff0bb1d827f11809aebc6bd0d5955c7f368469a913c70d196620272
      sequenceNumber: 123
      event:
        kind: SetDataSchema
        rawArrowSchema: DAAAAAgACAAAAAQACAAAAAQAAAACAAAAQAAAAAQAAADY////GAAAAAwAAAAAAAAGEAAAAAAAAAAEAAQABAAAAAEAAABiAAAAEAAUABAAAAAPAAQAAAAIABAAAAAYAAAAIAAAAAAAAAIcAAAACAAMAAQACwAIAAAAQAAAAAAAAAEAAAAAAQAAAGEAAAA=
    """
)

METADATA_BLOCK_YAML = text(
    """
    kind: MetadataBlock
    version: 3
    content:
      systemTime: 2020-01-01T12:00:00Z
      prevBlockHash: f16209eb949bd8ff0bb1d827f11809aebc6bd0d5955c7f368469a913c70d196620272
      sequenceNumber: 127
      event:
        kind: ExecuteTransform
        queryInputs:
        - datasetId: did:odf:fed01816ef0a9abe93aba816ef0a9abe93aba90e6065747170300c0d3d30c2cd8d7a4
          prevBlockHash: f162080084bf2fba02475726feb2cab2d8215eab14bc6bdd8bfb2c8151257032ecd8b
          newBlockHash: f1620b039179a8a4ce2c252aa6f2f25798251c19b75fc1508d9d511a191e0487d64a7
          prevOffset: 9
          newOffset: 20
        - datasetId: did:odf:fed01826ef0a9abea3a3a826ef0a9abea3a3a90e6065747270300c1d3b30a2cd9d724
          prevBlockHash: f162080084bf2fba02475726feb2cab2d8215eab14bc6bdd8bfb2c8151257032ecd8b
          newBlockHash: f1620b039179a8a4ce2c252aa6f2f25798251c19b75fc1508d9d511a191e0487d64a7
        prevCheckpoint: f1620894b355f91b194f31c1116dcec200b68d5cfd90a3df19032829fa643bc711fcb
        prevOffset: 9
        newData:
          logicalHash: f162076d3bc41c9f588f7fcd0d5bf4718f8f84b1c41b20882703100b9eb9413807c01
          physicalHash: f1620cceefd7e0545bcf8b6d19f3b5750c8a3ee8350418877bc6fb12e32de28137355
          offsetInterval:
            start: 10
            end: 19
          size: 10
        newWatermark: 2020-01-01T12:00:00Z
    """
)

BLOCK_CASES = [
    (block(SetDataSchema(schema=extended_schema()), 123), SET_DATA_SCHEMA_YAML),
    (block(LEGACY_SET_DATA_SCHEMA, 123), SET_DATA_SCHEMA_LEGACY_YAML),
    (block(execute_transform(), 127), METADATA_BLOCK_YAML),
]


@pytest.mark.parametrize(
    ("value", "data"), BLOCK_CASES, ids=["set-data-schema", "legacy-schema", "execute-transform"]
)
def test_block_manifest_written_and_read(value: MetadataBlock, data: str) -> None:
    assert odf_yaml.dump_block(value) == data
    assert odf_yaml.load_block(data) == value


@pytest.mark.parametrize(
    ("value", "data"), BLOCK_CASES, ids=["set-data-schema", "legacy-schema", "execute-transform"]
)
def test_block_json_has_the_yaml_structure(value: MetadataBlock, data: str) -> None:
    text_json = odf_json.dump_block(value, indent=2)
    assert odf_json.load_block(text_json) == value
    tree = json.loads(text_json)
    assert tree["kind"] == "MetadataBlock" and tree["version"] == 3
    assert tree["content"] == to_tree(value)
    assert odf_yaml.dump_block(value) == data


def test_obsolete_block_version_is_rejected() -> None:
    data = METADATA_BLOCK_YAML.replace("version: 3", "version: 1")
    with pytest.raises(DecodeError, match="MetadataBlock manifest version 1 is not supported"):
        odf_yaml.load_block(data)


# --- dataset snapshots ----------------------------------------------------------------------------

SNAPSHOT_ROOT = text(
    """
    kind: DatasetSnapshot
    version: 1
    content:
      name: kamu.test
      kind: Root
      metadata:
      - kind: SetPollingSource
        fetch:
          kind: Url
          url: ftp://kamu.dev/test.zip
          cache:
            kind: Forever
        prepare:
        - kind: Decompress
          format: Zip
          subPath: data_*.csv
        read:
          kind: Csv
          header: true
        preprocess:
          kind: Sql
          engine: spark
          query: SELECT * FROM input
        merge:
          kind: Snapshot
          primaryKey:
          - id
    """
)


def derivative_snapshot(name: str, refs: tuple[str, str]) -> DatasetSnapshot:
    return DatasetSnapshot(
        name=DatasetAlias.parse(name),
        kind=DatasetKind.DERIVATIVE,
        metadata=(
            SetTransform(
                inputs=tuple(TransformInput(dataset_ref=DatasetRef.parse(r)) for r in refs),
                transform=TransformSql(engine="spark", query="SOME_SQL"),
            ),
        ),
    )


def derivative_text(name: str, refs: tuple[str, str]) -> str:
    return text(
        f"""
        kind: DatasetSnapshot
        version: 1
        content:
          name: {name}
          kind: Derivative
          metadata:
          - kind: SetTransform
            inputs:
            - datasetRef: {refs[0]}
            - datasetRef: {refs[1]}
            transform:
              kind: Sql
              engine: spark
              query: SOME_SQL
        """
    )


ROOT_SNAPSHOT = DatasetSnapshot(
    name=DatasetAlias.parse("kamu.test"),
    kind=DatasetKind.ROOT,
    metadata=(
        SetPollingSource(
            fetch=FetchStepUrl(url="ftp://kamu.dev/test.zip", cache=SourceCachingForever()),
            prepare=(PrepStepDecompress(format=CompressionFormat.ZIP, sub_path="data_*.csv"),),
            read=ReadStepCsv(header=True),
            preprocess=TransformSql(engine="spark", query="SELECT * FROM input"),
            merge=MergeStrategySnapshot(primary_key=("id",)),
        ),
    ),
)

SINGLE_TENANT = (
    "com.naturalearthdata.admin0",
    ("com.naturalearthdata.10m.admin0", "com.naturalearthdata.50m.admin0"),
)
MULTI_TENANT = (
    "a/com.naturalearthdata.admin0",
    ("b/com.naturalearthdata.10m.admin0", "c/com.naturalearthdata.50m.admin0"),
)
SNAPSHOT_CASES = [
    (ROOT_SNAPSHOT, SNAPSHOT_ROOT),
    (derivative_snapshot(*SINGLE_TENANT), derivative_text(*SINGLE_TENANT)),
    (derivative_snapshot(*MULTI_TENANT), derivative_text(*MULTI_TENANT)),
]


@pytest.mark.parametrize(
    ("value", "data"), SNAPSHOT_CASES, ids=["root", "derivative", "multi-tenant"]
)
def test_snapshot_written_and_read(value: DatasetSnapshot, data: str) -> None:
    assert odf_yaml.load_snapshot(data) == value
    assert odf_yaml.dump_snapshot(value) == data


def test_multi_document_snapshot_file() -> None:
    data = odf_yaml.dump_snapshots([value for value, _ in SNAPSHOT_CASES])
    assert data.count("---\n") == 2
    assert odf_yaml.load_snapshots(data) == [value for value, _ in SNAPSHOT_CASES]


def test_snapshot_errors_name_document_and_field() -> None:
    bad = SNAPSHOT_ROOT.replace("subPath: data_*.csv", "subPath: data_*.csv\n      sub_path: x")
    data = derivative_text(*SINGLE_TENANT) + "---\n" + bad
    with pytest.raises(
        DecodeError,
        match=r"^snapshots.yaml document 1: content\.metadata\[0\]\.prepare\[0\]\.sub_path: unknown field `sub_path`",
    ):
        odf_yaml.load_snapshots(data, source="snapshots.yaml")


def test_unknown_union_kind_names_field_path() -> None:
    bad = SNAPSHOT_ROOT.replace("kind: Snapshot", "kind: Merge")
    with pytest.raises(
        DecodeError, match=r"content\.metadata\[0\]\.merge\.kind: unknown variant `Merge`"
    ):
        odf_yaml.load_snapshot(bad)


# --- fragments ------------------------------------------------------------------------------------


def test_fetch_step_files_glob() -> None:
    data = "kind: FilesGlob\npath: /opt/x/*.txt\ncache:\n  kind: Forever\norder: ByName\n"
    value = odf_yaml.loads(data, "FetchStep")
    assert value == FetchStepFilesGlob(
        path="/opt/x/*.txt", cache=SourceCachingForever(), order=SourceOrdering.BY_NAME
    )
    assert odf_yaml.dumps(value) == data


def test_transform_with_queries_and_temporal_tables() -> None:
    data = text(
        """
        kind: Sql
        engine: flink
        queries:
        - alias: bar
          query: SELECT * FROM foo
        temporalTables:
        - name: foo
          primaryKey:
          - id
        """
    )
    value = odf_yaml.loads(data, "Transform")
    assert value == TransformSql(
        engine="flink",
        queries=(SqlQueryStep(alias="bar", query="SELECT * FROM foo"),),
        temporal_tables=(TemporalTable(name="foo", primary_key=("id",)),),
    )
    assert odf_yaml.dumps(value) == data


def test_data_type_short_form_is_read_and_expanded() -> None:
    data = text(
        """
        fields:
        - name: long
          type:
            kind: Timestamp
        - name: short
          type: Timestamp
        - name: full
          type:
            kind: Timestamp
            unit: Nanosecond
            timezone: UTC
        """
    )
    value = odf_yaml.loads(data, "DataSchema")
    assert value == DataSchema(
        fields=(
            DataField(name="long", type=DataTypeTimestamp()),
            DataField(name="short", type=DataTypeTimestamp()),
            DataField(
                name="full", type=DataTypeTimestamp(unit=TimeUnit.NANOSECOND, timezone="UTC")
            ),
        )
    )
    assert odf_yaml.dumps(value) == data.replace(
        "  type: Timestamp\n", "  type:\n    kind: Timestamp\n"
    )


def test_data_type_short_form_rejects_unknown_types() -> None:
    with pytest.raises(DecodeError, match="unknown variant `Invalid`"):
        odf_yaml.loads("fields:\n- name: short\n  type: Invalid\n", "DataSchema")


@pytest.mark.parametrize(
    "value", ["\u2028", "a\rb", "x\ny\r\n", "\x85 z", "tail\u2029", "two\n\u2028lines"]
)
def test_strings_with_non_newline_breaks_round_trip(value: str) -> None:
    """libyaml folds these breaks inside single-quoted and literal scalars; we double-quote them."""
    from protocol.model import FetchStepUrl, RequestHeader

    step = FetchStepUrl(url="http://x", headers=(RequestHeader(name="h", value=value),))
    text = odf_yaml.dumps(step)
    assert '"' in text
    assert odf_yaml.loads(text, "FetchStep") == step
