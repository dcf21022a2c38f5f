"""``CommandGetSqlInfo``: what the server and its SQL dialect (DataFusion's) support.

Drivers read it when they connect (server name and version, read-only, transactions) and JDBC
tools ask it for ``DatabaseMetaData``. The result is one row per requested id: ``info_name``
(uint32) and ``value``, a dense union whose members the protocol fixes by type code. Ids a
request names that are not listed here are left out, as the protocol allows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

import pyarrow as pa

import odfd


class Info(IntEnum):
    """The ``SqlInfo`` ids answered (their numbers are the protocol's)."""

    SERVER_NAME = 0
    SERVER_VERSION = 1
    SERVER_ARROW_VERSION = 2
    SERVER_READ_ONLY = 3
    SERVER_SQL = 4
    SERVER_SUBSTRAIT = 5
    SERVER_TRANSACTION = 8
    SERVER_CANCEL = 9
    SERVER_STATEMENT_TIMEOUT = 100
    SERVER_TRANSACTION_TIMEOUT = 101
    DDL_CATALOG = 500
    DDL_SCHEMA = 501
    DDL_TABLE = 502
    IDENTIFIER_CASE = 503
    IDENTIFIER_QUOTE_CHAR = 504
    QUOTED_IDENTIFIER_CASE = 505
    ALL_TABLES_ARE_SELECTABLE = 506
    NULL_ORDERING = 507
    SEARCH_STRING_ESCAPE = 513
    EXTRA_NAME_CHARACTERS = 514
    SUPPORTS_COLUMN_ALIASING = 515
    NULL_PLUS_NULL_IS_NULL = 516
    SUPPORTS_TABLE_CORRELATION_NAMES = 518
    SUPPORTS_DIFFERENT_TABLE_CORRELATION_NAMES = 519
    SUPPORTS_EXPRESSIONS_IN_ORDER_BY = 520
    SUPPORTS_ORDER_BY_UNRELATED = 521
    SUPPORTED_GROUP_BY = 522
    SUPPORTS_LIKE_ESCAPE_CLAUSE = 523
    SUPPORTS_NON_NULLABLE_COLUMNS = 524
    SUPPORTED_GRAMMAR = 525
    ANSI92_SUPPORTED_LEVEL = 526
    SUPPORTS_INTEGRITY_ENHANCEMENT_FACILITY = 527
    OUTER_JOINS_SUPPORT_LEVEL = 528
    SCHEMA_TERM = 529
    PROCEDURE_TERM = 530
    CATALOG_TERM = 531
    CATALOG_AT_START = 532
    SCHEMAS_SUPPORTED_ACTIONS = 533
    CATALOGS_SUPPORTED_ACTIONS = 534
    SUPPORTED_POSITIONED_COMMANDS = 535
    SELECT_FOR_UPDATE_SUPPORTED = 536
    STORED_PROCEDURES_SUPPORTED = 537
    SUPPORTED_SUBQUERIES = 538
    CORRELATED_SUBQUERIES_SUPPORTED = 539
    SUPPORTED_UNIONS = 540
    MAX_BINARY_LITERAL_LENGTH = 541
    MAX_CHAR_LITERAL_LENGTH = 542
    MAX_COLUMN_NAME_LENGTH = 543
    MAX_COLUMNS_IN_GROUP_BY = 544
    MAX_COLUMNS_IN_INDEX = 545
    MAX_COLUMNS_IN_ORDER_BY = 546
    MAX_COLUMNS_IN_SELECT = 547
    MAX_COLUMNS_IN_TABLE = 548
    MAX_CONNECTIONS = 549
    MAX_CURSOR_NAME_LENGTH = 550
    MAX_INDEX_LENGTH = 551
    DB_SCHEMA_NAME_LENGTH = 552
    MAX_PROCEDURE_NAME_LENGTH = 553
    MAX_CATALOG_NAME_LENGTH = 554
    MAX_ROW_SIZE = 555
    MAX_ROW_SIZE_INCLUDES_BLOBS = 556
    MAX_STATEMENT_LENGTH = 557
    MAX_STATEMENTS = 558
    MAX_TABLE_NAME_LENGTH = 559
    MAX_TABLES_IN_SELECT = 560
    MAX_USERNAME_LENGTH = 561
    DEFAULT_TRANSACTION_ISOLATION = 562
    TRANSACTIONS_SUPPORTED = 563
    SUPPORTED_TRANSACTIONS_ISOLATION_LEVELS = 564
    DATA_DEFINITION_CAUSES_TRANSACTION_COMMIT = 565
    DATA_DEFINITIONS_IN_TRANSACTIONS_IGNORED = 566
    SUPPORTED_RESULT_SET_TYPES = 567
    CONCURRENCIES_FOR_RESULT_SET_UNSPECIFIED = 568
    CONCURRENCIES_FOR_RESULT_SET_FORWARD_ONLY = 569
    CONCURRENCIES_FOR_RESULT_SET_SCROLL_SENSITIVE = 570
    CONCURRENCIES_FOR_RESULT_SET_SCROLL_INSENSITIVE = 571
    BATCH_UPDATES_SUPPORTED = 572
    SAVEPOINTS_SUPPORTED = 573
    NAMED_PARAMETERS_SUPPORTED = 574
    LOCATORS_UPDATE_COPY = 575
    STORED_FUNCTIONS_USING_CALL_SYNTAX_SUPPORTED = 576


@dataclass(frozen=True, slots=True)
class Int64:
    """A value the protocol types int64 (the union's ``bigint_value``), unlike the int32
    ordinals and bitmasks plain ints stand for."""

    value: int


_NO_LIMIT = Int64(2**31 - 1)
"""The maximum lengths and counts, as the reference answers them: Arrow's largest string."""
_MAXIMA = (
    Info.MAX_BINARY_LITERAL_LENGTH,
    Info.MAX_CHAR_LITERAL_LENGTH,
    Info.MAX_COLUMN_NAME_LENGTH,
    Info.MAX_COLUMNS_IN_GROUP_BY,
    Info.MAX_COLUMNS_IN_INDEX,
    Info.MAX_COLUMNS_IN_ORDER_BY,
    Info.MAX_COLUMNS_IN_SELECT,
    Info.MAX_COLUMNS_IN_TABLE,
    Info.MAX_CONNECTIONS,
    Info.MAX_CURSOR_NAME_LENGTH,
    Info.MAX_INDEX_LENGTH,
    Info.DB_SCHEMA_NAME_LENGTH,
    Info.MAX_PROCEDURE_NAME_LENGTH,
    Info.MAX_CATALOG_NAME_LENGTH,
    Info.MAX_ROW_SIZE,
    Info.MAX_STATEMENT_LENGTH,
    Info.MAX_STATEMENTS,
    Info.MAX_TABLE_NAME_LENGTH,
    Info.MAX_TABLES_IN_SELECT,
    Info.MAX_USERNAME_LENGTH,
)


# The union's members, by type code: what a value's Python type selects.
_STRING, _BOOL, _BIGINT, _INT32, _STRING_LIST, _INT32_MAP = range(6)
VALUE_TYPE = pa.dense_union(
    [
        pa.field("string_value", pa.utf8()),
        pa.field("bool_value", pa.bool_()),
        pa.field("bigint_value", pa.int64()),
        pa.field("int32_bitmask", pa.int32()),
        pa.field("string_list", pa.list_(pa.utf8())),
        pa.field("int32_to_int32_list_map", pa.map_(pa.int32(), pa.list_(pa.int32()))),
    ],
    type_codes=[_STRING, _BOOL, _BIGINT, _INT32, _STRING_LIST, _INT32_MAP],
)
SCHEMA = pa.schema(
    [pa.field("info_name", pa.uint32(), nullable=False), pa.field("value", VALUE_TYPE, False)]
)


Value = str | bool | int | Int64


def values(statement_timeout_ms: int) -> dict[Info, Value]:
    """Every answered id and its value (ints are the protocol's int32 ordinals and bitmasks):
    the ids the reference answers, with DataFusion's truth where the reference's differs."""
    return {
        Info.SERVER_NAME: "odfd",
        Info.SERVER_VERSION: odfd.__version__,
        Info.SERVER_ARROW_VERSION: pa.__version__,
        Info.SERVER_READ_ONLY: True,
        Info.SERVER_SQL: True,
        Info.SERVER_SUBSTRAIT: False,
        Info.SERVER_TRANSACTION: 0,  # no transactions
        Info.SERVER_CANCEL: False,
        Info.SERVER_STATEMENT_TIMEOUT: statement_timeout_ms,  # idle prepared statements expire
        Info.SERVER_TRANSACTION_TIMEOUT: 0,
        Info.DDL_CATALOG: False,
        Info.DDL_SCHEMA: False,
        Info.DDL_TABLE: False,
        Info.IDENTIFIER_CASE: 0,  # unknown: names are case-sensitive, which no ordinal says
        Info.IDENTIFIER_QUOTE_CHAR: '"',
        Info.QUOTED_IDENTIFIER_CASE: 0,
        Info.ALL_TABLES_ARE_SELECTABLE: True,
        Info.NULL_ORDERING: 0,  # sorted high: last ascending, first descending
        Info.SEARCH_STRING_ESCAPE: "\\",
        Info.EXTRA_NAME_CHARACTERS: "",
        Info.SUPPORTS_COLUMN_ALIASING: True,
        Info.NULL_PLUS_NULL_IS_NULL: True,
        Info.SUPPORTS_TABLE_CORRELATION_NAMES: True,
        Info.SUPPORTS_DIFFERENT_TABLE_CORRELATION_NAMES: True,
        Info.SUPPORTS_EXPRESSIONS_IN_ORDER_BY: True,
        Info.SUPPORTS_ORDER_BY_UNRELATED: True,
        Info.SUPPORTED_GROUP_BY: 0b11,  # unrelated, beyond select
        Info.SUPPORTS_LIKE_ESCAPE_CLAUSE: True,
        Info.SUPPORTS_NON_NULLABLE_COLUMNS: True,
        Info.SUPPORTED_GRAMMAR: 0b11,  # minimum, core
        Info.ANSI92_SUPPORTED_LEVEL: 0b1,  # entry
        Info.SUPPORTS_INTEGRITY_ENHANCEMENT_FACILITY: False,
        Info.OUTER_JOINS_SUPPORT_LEVEL: 2,  # full outer joins
        Info.SCHEMA_TERM: "schema",
        Info.PROCEDURE_TERM: "procedure",
        Info.CATALOG_TERM: "catalog",
        Info.CATALOG_AT_START: True,
        Info.SCHEMAS_SUPPORTED_ACTIONS: 0,
        Info.CATALOGS_SUPPORTED_ACTIONS: 0,
        Info.SUPPORTED_POSITIONED_COMMANDS: 0,
        Info.SELECT_FOR_UPDATE_SUPPORTED: False,
        Info.STORED_PROCEDURES_SUPPORTED: False,
        Info.SUPPORTED_SUBQUERIES: 0b1111,  # comparisons, exists, in, quantified
        Info.CORRELATED_SUBQUERIES_SUPPORTED: True,
        Info.SUPPORTED_UNIONS: 0b11,  # union, union all
        **dict.fromkeys(_MAXIMA, _NO_LIMIT),
        Info.MAX_ROW_SIZE_INCLUDES_BLOBS: True,
        Info.DEFAULT_TRANSACTION_ISOLATION: 0,  # none
        Info.TRANSACTIONS_SUPPORTED: False,
        Info.SUPPORTED_TRANSACTIONS_ISOLATION_LEVELS: 0,
        Info.DATA_DEFINITION_CAUSES_TRANSACTION_COMMIT: False,
        Info.DATA_DEFINITIONS_IN_TRANSACTIONS_IGNORED: True,
        Info.SUPPORTED_RESULT_SET_TYPES: 0,
        Info.CONCURRENCIES_FOR_RESULT_SET_UNSPECIFIED: 0,
        Info.CONCURRENCIES_FOR_RESULT_SET_FORWARD_ONLY: 0,
        Info.CONCURRENCIES_FOR_RESULT_SET_SCROLL_SENSITIVE: 0,
        Info.CONCURRENCIES_FOR_RESULT_SET_SCROLL_INSENSITIVE: 0,
        Info.BATCH_UPDATES_SUPPORTED: False,
        Info.SAVEPOINTS_SUPPORTED: False,
        Info.NAMED_PARAMETERS_SUPPORTED: False,
        Info.LOCATORS_UPDATE_COPY: False,
        Info.STORED_FUNCTIONS_USING_CALL_SYNTAX_SUPPORTED: False,
    }


def sql_info(requested: Iterable[int], statement_timeout_ms: int) -> pa.Table:
    """The rows for ``requested`` ids (all answered ids when it is empty), in id order."""
    known = values(statement_timeout_ms)
    wanted = sorted(set(requested)) or sorted(known)
    rows = [(info, known[Info(info)]) for info in wanted if info in Info._value2member_map_]
    codes: list[int] = []
    offsets: list[int] = []
    members: list[list[str | bool | int]] = [[] for _ in range(6)]
    for _, value in rows:
        code, plain = _member(value)
        codes.append(code)
        offsets.append(len(members[code]))
        members[code].append(plain)
    union = pa.UnionArray.from_dense(
        pa.array(codes, pa.int8()),
        pa.array(offsets, pa.int32()),
        [
            pa.array(members[position], VALUE_TYPE.field(position).type)
            for position in range(VALUE_TYPE.num_fields)
        ],
        [field.name for field in VALUE_TYPE],
        list(VALUE_TYPE.type_codes),
    )
    names = pa.array([info for info, _ in rows], pa.uint32())
    return pa.Table.from_arrays([names, union], schema=SCHEMA)


def _member(value: Value) -> tuple[int, str | bool | int]:
    """The union member (type code) a value travels in, and the value as that member holds it."""
    if isinstance(value, Int64):
        return _BIGINT, value.value
    if isinstance(value, bool):
        return _BOOL, value
    if isinstance(value, int):
        return _INT32, value
    return _STRING, value
