"""The query request of the reference's ``/query`` endpoint, as its JSON body (POST) and its query
string (GET) spell it, and the typed model both parse into.

Field names, defaults, accepted spellings and refusals are the reference's: ``queryDialect``
defaults to ``SqlDataFusion``, ``dataFormat`` to ``JsonAoS``, ``include`` to nothing, ``skip`` to
0 and ``limit`` to 100; unknown fields are refused; formats accept a few aliases
(``json-aos``, ``jsonaos``, ``JsonAos``); the query string also accepts ``format`` for
``dataFormat`` and a comma-separated, case-insensitive ``include``.

``with_implications`` applies what the reference infers before answering: a proof needs the
input (``Proof`` adds ``Input``) and a schema format asks for the schema (adds ``Schema``). The
input echoed in an answer (``echo``) is the request with those additions, the datasets pinned at
the blocks the query read and the schema format used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from protocol.errors import ParseError
from protocol.identity import DatasetId, Multihash
from protocol.query.errors import RequestError
from protocol.query.json_text import loads

_U64_MAX = (1 << 64) - 1


class QueryDialect(StrEnum):
    SQL_DATAFUSION = "SqlDataFusion"
    SQL_FLINK = "SqlFlink"
    SQL_RISING_WAVE = "SqlRisingWave"
    SQL_SPARK = "SqlSpark"


class DataFormat(StrEnum):
    """How rows are laid out: array of objects, object of arrays, array of arrays."""

    JSON_AOS = "JsonAoS"
    JSON_SOA = "JsonSoA"
    JSON_AOA = "JsonAoA"


class SchemaFormat(StrEnum):
    ARROW_JSON = "ArrowJson"
    ODF_JSON = "OdfJson"
    ODF_YAML = "OdfYaml"
    PARQUET = "Parquet"
    PARQUET_JSON = "ParquetJson"


class Include(StrEnum):
    """Optional parts of an answer; ordered as the reference orders them."""

    INPUT = "Input"
    PROOF = "Proof"
    SCHEMA = "Schema"


_INCLUDE_ORDER = {member: index for index, member in enumerate(Include)}


def _spellings(members: Iterable[StrEnum], extra: Mapping[str, list[str]]) -> dict[str, Any]:
    names: dict[str, Any] = {}
    for member in members:
        names[member.value] = member
        for alias in extra.get(member.value, []):
            names[alias] = member
    return names


_DIALECTS = _spellings(QueryDialect, {})
_DATA_FORMATS = _spellings(
    DataFormat,
    {
        "JsonAoS": ["jsonaos", "json-aos", "JsonAos"],
        "JsonSoA": ["jsonsoa", "json-soa", "JsonSoa"],
        "JsonAoA": ["jsonaoa", "json-aoa", "JsonAoa"],
    },
)
_SCHEMA_FORMATS = _spellings(
    SchemaFormat,
    {
        "ArrowJson": ["arrowjson", "arrow-json"],
        "OdfJson": ["odfjson", "odf-json"],
        "OdfYaml": ["odfyaml", "odf-yaml"],
        "Parquet": ["parquet"],
        "ParquetJson": ["parquetjson", "parquet-json"],
    },
)
_INCLUDES = _spellings(Include, {"Input": ["input"], "Proof": ["proof"], "Schema": ["schema"]})

DEFAULT_LIMIT = 100


@dataclass(frozen=True, slots=True)
class DatasetState:
    """A dataset a query reads: its id, the alias the query names it by and, once resolved or
    to reproduce an answer, the block its data is read at."""

    id: DatasetId
    alias: str
    block_hash: Multihash | None = None

    def to_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {"id": str(self.id), "alias": self.alias}
        if self.block_hash is not None:
            value["blockHash"] = str(self.block_hash)
        return value

    @classmethod
    def from_json(cls, value: Any, where: str) -> DatasetState:
        fields = _object(value, where, "struct DatasetState", ("id", "alias", "blockHash"))
        dataset_id = _required(fields, "id", where)
        alias = _required(fields, "alias", where)
        block_hash = fields.get("blockHash")
        return cls(
            id=_dataset_id(dataset_id, _at(where, "id")),
            alias=_string(alias, _at(where, "alias")),
            block_hash=None
            if block_hash is None
            else _multihash(block_hash, _at(where, "blockHash")),
        )


@dataclass(frozen=True, slots=True)
class QueryRequest:
    query: str
    query_dialect: QueryDialect = QueryDialect.SQL_DATAFUSION
    data_format: DataFormat = DataFormat.JSON_AOS
    include: frozenset[Include] = field(default_factory=frozenset)
    schema_format: SchemaFormat | None = None
    datasets: tuple[DatasetState, ...] | None = None
    skip: int = 0
    limit: int = DEFAULT_LIMIT

    @classmethod
    def from_json_body(cls, body: bytes | str) -> QueryRequest:
        """Parse a POST body."""
        return cls.from_json(loads(body))

    @classmethod
    def from_json(cls, value: Any, where: str = "") -> QueryRequest:
        """Read a request from a parsed JSON value; errors name the field."""
        names = (
            "query",
            "queryDialect",
            "dataFormat",
            "include",
            "schemaFormat",
            "datasets",
            "skip",
            "limit",
        )
        fields = _object(value, where, "struct QueryRequest", names)
        request = cls(query=_string(_required(fields, "query", where), _at(where, "query")))
        if "queryDialect" in fields:
            dialect = _variant(fields["queryDialect"], _DIALECTS, _at(where, "queryDialect"))
            request = replace(request, query_dialect=dialect)
        if "dataFormat" in fields:
            data_format = _variant(fields["dataFormat"], _DATA_FORMATS, _at(where, "dataFormat"))
            request = replace(request, data_format=data_format)
        if "include" in fields:
            request = replace(request, include=_includes(fields["include"], _at(where, "include")))
        if fields.get("schemaFormat") is not None:
            schema_format = _variant(
                fields["schemaFormat"], _SCHEMA_FORMATS, _at(where, "schemaFormat")
            )
            request = replace(request, schema_format=schema_format)
        if fields.get("datasets") is not None:
            request = replace(
                request, datasets=_datasets(fields["datasets"], _at(where, "datasets"))
            )
        if "skip" in fields:
            request = replace(request, skip=_u64(fields["skip"], _at(where, "skip")))
        if "limit" in fields:
            request = replace(request, limit=_u64(fields["limit"], _at(where, "limit")))
        return request

    @classmethod
    def from_query_params(cls, params: Iterable[tuple[str, str]]) -> QueryRequest:
        """Parse the query string of ``GET /query`` (pairs in order, as a multidict holds them).

        ``datasets`` cannot be given this way, as in the reference."""
        names = ("query", "queryDialect", "skip", "limit", "dataFormat", "schemaFormat", "include")
        values: dict[str, str] = {}
        for name, text in params:
            key = "dataFormat" if name == "format" else name
            if key not in names:
                raise RequestError(name, _unknown_field(name, (*names, "format")))
            if key in values:
                raise RequestError(name, f"duplicate field `{key}`")
            values[key] = text
        if "query" not in values:
            raise RequestError("", "missing field `query`")
        request = cls(query=values["query"])
        if "queryDialect" in values:
            dialect = _variant(values["queryDialect"], _DIALECTS, "queryDialect")
            request = replace(request, query_dialect=dialect)
        if "dataFormat" in values:
            data_format = _variant(values["dataFormat"], _DATA_FORMATS, "dataFormat")
            request = replace(request, data_format=data_format)
        if "schemaFormat" in values:
            schema_format = _variant(values["schemaFormat"], _SCHEMA_FORMATS, "schemaFormat")
            request = replace(request, schema_format=schema_format)
        if "include" in values:
            request = replace(request, include=_comma_separated_includes(values["include"]))
        if "skip" in values:
            request = replace(request, skip=_u64_text(values["skip"], "skip"))
        if "limit" in values:
            request = replace(request, limit=_u64_text(values["limit"], "limit"))
        return request

    def to_json(self) -> dict[str, Any]:
        """The JSON value of the request, fields in the reference's order."""
        value: dict[str, Any] = {
            "query": self.query,
            "queryDialect": self.query_dialect.value,
            "dataFormat": self.data_format.value,
            "include": [member.value for member in self.include_list],
        }
        if self.schema_format is not None:
            value["schemaFormat"] = self.schema_format.value
        if self.datasets is not None:
            value["datasets"] = [dataset.to_json() for dataset in self.datasets]
        value["skip"] = self.skip
        value["limit"] = self.limit
        return value

    @property
    def include_list(self) -> list[Include]:
        return sorted(self.include, key=_INCLUDE_ORDER.__getitem__)

    def with_implications(self) -> QueryRequest:
        """``Proof`` adds ``Input``; a schema format adds ``Schema``."""
        include = set(self.include)
        if Include.PROOF in include:
            include.add(Include.INPUT)
        if self.schema_format is not None:
            include.add(Include.SCHEMA)
        return replace(self, include=frozenset(include))

    @property
    def answer_schema_format(self) -> SchemaFormat | None:
        """The schema format of the answer: the one asked for (``ArrowJson`` if none) when the
        schema is included, else none."""
        if Include.SCHEMA not in self.with_implications().include:
            return None
        return self.schema_format or SchemaFormat.ARROW_JSON

    @property
    def wants_input(self) -> bool:
        return bool({Include.INPUT, Include.PROOF} & self.include)

    @property
    def wants_proof(self) -> bool:
        return Include.PROOF in self.include

    def echo(self, datasets: Sequence[DatasetState]) -> QueryRequest:
        """The input an answer shows: implications applied, the datasets as the query read
        them and the schema format of the answer."""
        return replace(
            self.with_implications(),
            datasets=tuple(datasets),
            schema_format=self.answer_schema_format,
        )

    def to_reproduce(self) -> QueryRequest:
        """The request ``/verify`` re-executes: the same input without ``include`` (the schema
        format, if any, still brings the schema into the output)."""
        return replace(self, include=frozenset())


def _at(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _describe(value: Any) -> str:
    """A JSON value as serde names it in type errors."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{'true' if value else 'false'}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value!r}`"
    if isinstance(value, str):
        return f"string {_quote(value)}"
    if isinstance(value, list):
        return "sequence"
    return "map"


def _quote(text: str) -> str:
    import json

    return json.dumps(text, ensure_ascii=False)


def _object(value: Any, where: str, expected: str, names: Sequence[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestError(where, f"invalid type: {_describe(value)}, expected {expected}")
    for name in value:
        if name not in names:
            raise RequestError(_at(where, name), _unknown_field(name, names))
    return value


def _unknown_field(name: str, names: Sequence[str]) -> str:
    expected = ", ".join(f"`{known}`" for known in names)
    return f"unknown field `{name}`, expected one of {expected}"


def _required(fields: Mapping[str, Any], name: str, where: str) -> Any:
    if name not in fields:
        raise RequestError(where, f"missing field `{name}`")
    return fields[name]


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise RequestError(where, f"invalid type: {_describe(value)}, expected a string")
    return value


def _u64(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RequestError(where, f"invalid type: {_describe(value)}, expected u64")
    if not 0 <= value <= _U64_MAX:
        raise RequestError(where, f"invalid value: {_describe(value)}, expected u64")
    return value


def _u64_text(text: str, where: str) -> int:
    digits = text[1:] if text.startswith("+") else text
    if not digits:
        raise RequestError(where, "cannot parse integer from empty string")
    if not digits.isascii() or not digits.isdigit():
        raise RequestError(where, f"invalid digit found in string {_quote(text)}")
    value = int(digits)
    if value > _U64_MAX:
        raise RequestError(where, "number too large to fit in target type")
    return value


def _variant(value: Any, names: Mapping[str, Any], where: str) -> Any:
    if not isinstance(value, str):
        raise RequestError(where, f"invalid type: {_describe(value)}, expected a string")
    if value not in names:
        expected = ", ".join(f"`{name}`" for name in names)
        raise RequestError(where, f"unknown variant `{value}`, expected one of {expected}")
    return names[value]


def _includes(value: Any, where: str) -> frozenset[Include]:
    if not isinstance(value, list):
        raise RequestError(where, f"invalid type: {_describe(value)}, expected a sequence")
    return frozenset(
        _variant(item, _INCLUDES, f"{where}[{index}]") for index, item in enumerate(value)
    )


def _comma_separated_includes(text: str) -> frozenset[Include]:
    if not text:
        return frozenset()
    members = {member.value.lower(): member for member in Include}
    chosen = set()
    for item in text.split(","):
        member = members.get(item.lower())
        if member is None:
            raise RequestError("include", f"Matching variant not found: {_quote(item)}")
        chosen.add(member)
    return frozenset(chosen)


def _datasets(value: Any, where: str) -> tuple[DatasetState, ...]:
    if not isinstance(value, list):
        raise RequestError(where, f"invalid type: {_describe(value)}, expected a sequence")
    return tuple(
        DatasetState.from_json(item, f"{where}[{index}]") for index, item in enumerate(value)
    )


def _dataset_id(value: Any, where: str) -> DatasetId:
    try:
        return DatasetId.parse(_string(value, where))
    except ParseError as error:
        raise RequestError(where, str(error)) from None


def _multihash(value: Any, where: str) -> Multihash:
    try:
        return Multihash.from_multibase(_string(value, where))
    except ParseError as error:
        raise RequestError(where, str(error)) from None
