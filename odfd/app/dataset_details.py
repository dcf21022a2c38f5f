"""What the console and ``odfd inspect`` show about one dataset, read from its chain: a summary
(records, size, last update, description, license, readme), its schema (ODF and Arrow, or DDL),
its block log, records added per block, and the transform behind every block that changed its
data. Summaries are cached by head, so a page listing many datasets reads each chain once."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from protocol.codec import json as odf_json
from protocol.codec import yaml as odf_yaml
from protocol.identity import DatasetId, Multihash
from protocol.model import (
    AddData,
    AttachmentsEmbedded,
    ExecuteTransform,
    MetadataBlock,
    SetAttachments,
    SetInfo,
    SetLicense,
    SetTransform,
    Timestamp,
    kind_name,
)
from storage.catalog import DatasetRecord
from storage.dataset import Dataset
from verifier.engine.inputs import arrow_schema_of

if TYPE_CHECKING:
    from storage.workspace import Workspace


def _time(moment: Timestamp | None) -> str | None:
    return None if moment is None else moment.to_rfc3339()


@dataclass(frozen=True, slots=True)
class Summary:
    records: int
    size: int
    """Bytes of data slices."""
    data_blocks: int
    last_update: str | None
    """System time of the head block."""
    last_data: str | None
    description: str | None
    keywords: tuple[str, ...]
    license: dict[str, Any] | None
    readme: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "size": self.size,
            "dataBlocks": self.data_blocks,
            "lastUpdate": self.last_update,
            "lastData": self.last_data,
            "description": self.description,
            "keywords": list(self.keywords),
            "license": self.license,
            "readme": self.readme,
        }


EMPTY = Summary(0, 0, 0, None, None, None, (), None, None)


async def summarize(dataset: Dataset) -> Summary:
    """One walk from the head back to the seed; the newest of each event kind wins."""
    records = size = data_blocks = 0
    last_update = last_data = description = readme = None
    keywords: tuple[str, ...] = ()
    license_: dict[str, Any] | None = None
    seen_info = seen_license = seen_readme = False
    async for _, block in dataset.chain.iter_blocks():
        if last_update is None:
            last_update = _time(block.system_time)
        event = block.event
        if isinstance(event, AddData | ExecuteTransform) and event.new_data is not None:
            interval = event.new_data.offset_interval
            records += interval.end - interval.start + 1
            size += event.new_data.size
            data_blocks += 1
            last_data = last_data or _time(block.system_time)
        elif isinstance(event, SetInfo) and not seen_info:
            seen_info, description, keywords = True, event.description, event.keywords or ()
        elif isinstance(event, SetLicense) and not seen_license:
            seen_license = True
            license_ = {
                "shortName": event.short_name,
                "name": event.name,
                "spdxId": event.spdx_id,
                "websiteUrl": event.website_url,
            }
        elif isinstance(event, SetAttachments) and not seen_readme:
            seen_readme = True
            readme = _readme(event)
    return Summary(
        records, size, data_blocks, last_update, last_data, description, keywords, license_, readme
    )


def _readme(event: SetAttachments) -> str | None:
    if not isinstance(event.attachments, AttachmentsEmbedded):
        return None
    items = sorted(event.attachments.items, key=lambda a: "readme" not in a.path.lower())
    return items[0].content if items else None


class SummaryCache:
    """Summaries by (dataset, head): a chain is walked again only after its head moved."""

    def __init__(self) -> None:
        self._entries: dict[DatasetId, tuple[Multihash | None, Summary]] = {}

    async def get(self, dataset: Dataset, record: DatasetRecord) -> Summary:
        cached = self._entries.get(record.id)
        if cached is not None and cached[0] == record.head:
            return cached[1]
        summary = EMPTY if record.head is None else await summarize(dataset)
        self._entries[record.id] = (record.head, summary)
        return summary


# --- schema ---------------------------------------------------------------------------------------


async def schema_document(dataset: Dataset) -> dict[str, Any]:
    """The ODF schema (``SetDataSchema`` as JSON) and the Arrow schema's fields."""
    state = await dataset.chain.state()
    if state.schema is None:
        return {"odf": None, "arrow": None, "ddl": None}
    arrow = arrow_schema_of(state.schema)
    odf = json.loads(odf_json.dumps(state.schema)) if state.schema.schema is not None else None
    return {
        "odf": odf,
        "arrow": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in arrow],
        "ddl": ddl(arrow),
    }


def ddl(schema: pa.Schema) -> str:
    """The schema as a column list of SQL DDL (Spark SQL type names)."""
    return ",\n".join(
        f"{_quote(f.name)} {_sql_type(f.type)}{'' if f.nullable else ' NOT NULL'}" for f in schema
    )


def _quote(name: str) -> str:
    return name if name.isidentifier() else "`" + name.replace("`", "``") + "`"


def _sql_type(t: pa.DataType) -> str:
    simple = {
        pa.bool_(): "BOOLEAN",
        pa.int8(): "TINYINT",
        pa.int16(): "SMALLINT",
        pa.int32(): "INT",
        pa.int64(): "BIGINT",
        pa.uint8(): "SMALLINT",
        pa.uint16(): "INT",
        pa.uint32(): "BIGINT",
        pa.uint64(): "DECIMAL(20, 0)",
        pa.float16(): "FLOAT",
        pa.float32(): "FLOAT",
        pa.float64(): "DOUBLE",
        pa.date32(): "DATE",
        pa.date64(): "DATE",
    }
    if t in simple:
        return simple[t]
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "STRING"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "BINARY"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP" if t.tz else "TIMESTAMP_NTZ"
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision}, {t.scale})"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return f"ARRAY<{_sql_type(t.value_type)}>"
    if pa.types.is_struct(t):
        fields = ", ".join(f"{_quote(f.name)}: {_sql_type(f.type)}" for f in t)
        return f"STRUCT<{fields}>"
    if pa.types.is_map(t):
        return f"MAP<{_sql_type(t.key_type)}, {_sql_type(t.item_type)}>"
    if pa.types.is_dictionary(t):
        return _sql_type(t.value_type)
    return str(t).upper()


# --- blocks, history, transforms ------------------------------------------------------------------


def block_entry(block_hash: Multihash, block: MetadataBlock) -> dict[str, Any]:
    event = block.event
    entry: dict[str, Any] = {
        "sequenceNumber": block.sequence_number,
        "hash": block_hash.to_multibase(),
        "systemTime": _time(block.system_time),
        "kind": kind_name(event),
        "yaml": odf_yaml.dump_block(block),
    }
    if isinstance(event, AddData | ExecuteTransform) and event.new_data is not None:
        interval = event.new_data.offset_interval
        entry["records"] = interval.end - interval.start + 1
    return entry


async def block_log(dataset: Dataset, *, limit: int, before: int | None) -> list[dict[str, Any]]:
    """Newest first, ``limit`` blocks with sequence numbers below ``before``."""
    entries: list[dict[str, Any]] = []
    async for block_hash, block in dataset.chain.iter_blocks():
        if before is not None and block.sequence_number >= before:
            continue
        entries.append(block_entry(block_hash, block))
        if len(entries) >= limit:
            break
    return entries


async def records_history(dataset: Dataset) -> list[dict[str, Any]]:
    """Records added by each data block, oldest first (the console charts it)."""
    points: list[dict[str, Any]] = []
    async for _, block in dataset.chain.iter_blocks():
        event = block.event
        if isinstance(event, AddData | ExecuteTransform) and event.new_data is not None:
            interval = event.new_data.offset_interval
            points.append(
                {
                    "sequenceNumber": block.sequence_number,
                    "systemTime": _time(block.system_time),
                    "records": interval.end - interval.start + 1,
                    "watermark": _time(event.new_watermark),
                }
            )
    points.reverse()
    return points


@dataclass(frozen=True, slots=True)
class TransformStep:
    """A ``SetTransform`` and the data blocks committed under it."""

    sequence_number: int
    system_time: str | None
    engine: str
    inputs: tuple[str, ...]
    queries: tuple[tuple[str | None, str], ...]
    """``(alias, query)``: the steps of the transform, the output's alias being ``None``."""
    blocks: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {
            "sequenceNumber": self.sequence_number,
            "systemTime": self.system_time,
            "engine": self.engine,
            "inputs": list(self.inputs),
            "queries": [{"alias": alias, "query": query} for alias, query in self.queries],
            "blocks": self.blocks,
        }


async def transform_history(dataset: Dataset) -> list[TransformStep]:
    """Oldest first: every ``SetTransform`` with the ``ExecuteTransform`` blocks it produced."""
    steps: list[TransformStep] = []
    async for block_hash, block in dataset.chain.iter_blocks_forward():
        event = block.event
        if isinstance(event, SetTransform):
            transform = event.transform
            queries: tuple[tuple[str | None, str], ...] = (
                tuple((q.alias, q.query) for q in transform.queries)
                if transform.queries
                else ((None, transform.query or ""),)
            )
            inputs = tuple(i.alias or str(i.dataset_ref) for i in event.inputs)
            steps.append(
                TransformStep(
                    block.sequence_number,
                    _time(block.system_time),
                    transform.engine,
                    inputs,
                    queries,
                    [],
                )
            )
        elif isinstance(event, ExecuteTransform) and steps:
            interval = event.new_data.offset_interval if event.new_data is not None else None
            steps[-1].blocks.append(
                {
                    "sequenceNumber": block.sequence_number,
                    "hash": block_hash.to_multibase(),
                    "systemTime": _time(block.system_time),
                    "offsets": None if interval is None else [interval.start, interval.end],
                }
            )
    return steps


async def audit_history(
    workspace: Workspace, dataset_id: DatasetId, limit: int
) -> list[dict[str, Any]]:
    """The dataset's ``limit`` newest audits, newest first, each with its report."""
    from storage.catalog.audits import AuditTable

    return [
        {
            "scope": audit.scope,
            "trigger": audit.trigger,
            "status": audit.status,
            "summary": audit.summary,
            "head": None if audit.head is None else audit.head.to_multibase(),
            "startedAt": audit.started_at.isoformat(),
            "finishedAt": audit.finished_at.isoformat(),
            "report": None if audit.report is None else json.loads(audit.report),
        }
        for audit in await AuditTable(workspace.catalog).history(dataset_id, limit=limit)
    ]
