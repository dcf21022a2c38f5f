"""The Flight SQL messages as bytes on the wire, checked against encodings worked out by hand
from protobuf's wire format (field key = number << 3 | wire type; varints; length-delimited
strings and bytes; proto3 packs repeated numbers), the filter patterns, and the status errors'
rendering."""

from __future__ import annotations

import traceback

import pytest

from odfd.flight_sql import catalog, messages, session_options, status

TYPE_URL = b"type.googleapis.com/arrow.flight.protocol.sql."


def test_a_statement_query_in_an_any() -> None:
    packed = messages.pack(messages.new("CommandStatementQuery", query="select 1"))
    url = TYPE_URL + b"CommandStatementQuery"
    inner = b"\x0a\x08select 1"  # field 1, length-delimited, 8 bytes
    assert packed == b"\x0a" + bytes([len(url)]) + url + b"\x12" + bytes([len(inner)]) + inner
    name, message = messages.unpack(packed)
    assert (name, message.query, message.HasField("transaction_id")) == (
        "CommandStatementQuery",
        "select 1",
        False,
    )


def test_repeated_ids_are_packed_and_optional_fields_have_presence() -> None:
    info = messages.new("CommandGetSqlInfo", info=[0, 1, 500])
    assert info.SerializeToString() == b"\x0a\x04\x00\x01\xf4\x03"  # 500 = 0xf4 0x03
    tables = messages.new("CommandGetTables", catalog="", include_schema=True)
    assert tables.SerializeToString() == b"\x0a\x00\x28\x01"  # an empty catalog is still sent
    decoded = messages.unpack(messages.pack(tables))[1]
    assert decoded.HasField("catalog") and not decoded.HasField("db_schema_filter_pattern")


def test_a_prepared_statement_result() -> None:
    result = messages.new(
        "ActionCreatePreparedStatementResult", prepared_statement_handle=b"\x01\x02"
    )
    assert result.SerializeToString() == b"\x0a\x02\x01\x02"


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (short payloads: one-byte tag and length)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_session_options_are_a_map_of_string_values_on_the_wire() -> None:
    """``map<string, SessionOptionValue>``: repeated entries (key 1, value 2), the value's
    ``string_value`` field 1; a ``SetSessionOptionsResult``'s errors the same with an
    ``Error{value}`` varint."""

    def entry(key: bytes, value: bytes) -> bytes:
        return _field(1, _field(1, key) + _field(2, _field(1, value)))

    current = entry(b"catalog", b"odf") + entry(b"schema", b"odf")
    assert session_options.get_result() == current
    assert session_options.set_result(current) == b""  # set as they are: no errors
    refused = session_options.set_result(entry(b"catalog", b"x") + entry(b"foo", b"odf"))
    invalid_value, invalid_name = b"\x08\x02", b"\x08\x01"
    assert refused == _field(1, _field(1, b"catalog") + _field(2, invalid_value)) + _field(
        1, _field(1, b"foo") + _field(2, invalid_name)
    )


def test_unpack_names_unknown_flight_sql_messages_and_refuses_others() -> None:
    from google.protobuf import any_pb2

    other = any_pb2.Any(type_url=TYPE_URL.decode() + "CommandGetCrossReference", value=b"")
    assert messages.unpack(other.SerializeToString()) == ("CommandGetCrossReference", None)
    keys = any_pb2.Any(type_url=TYPE_URL.decode() + "CommandGetPrimaryKeys", value=b"\x1a\x01t")
    name, command = messages.unpack(keys.SerializeToString())  # field 3: the table
    assert (name, command.table, command.HasField("catalog")) == (
        "CommandGetPrimaryKeys",
        "t",
        False,
    )
    foreign = any_pb2.Any(type_url="type.googleapis.com/other.Thing", value=b"")
    with pytest.raises(messages.MessageError, match="not a Flight SQL command"):
        messages.unpack(foreign.SerializeToString())
    with pytest.raises(messages.MessageError, match="not a protobuf Any"):
        messages.unpack(b"\xff")
    broken = any_pb2.Any(type_url=TYPE_URL.decode() + "CommandStatementQuery", value=b"\x0a\x05ab")
    with pytest.raises(messages.MessageError, match="malformed CommandStatementQuery"):
        messages.unpack(broken.SerializeToString())


@pytest.mark.parametrize(
    ("pattern", "matching", "other"),
    [
        ("%", "alice/trades", None),
        ("n_ms", "nums", "nuums"),
        ("alice/%", "alice/trades", "bob/trades"),
        ("a\\_b", "a_b", "axb"),
        ("100\\%", "100%", "1000"),
    ],
)
def test_filter_patterns(pattern: str, matching: str, other: str | None) -> None:
    command = messages.new("CommandGetTables", table_name_filter_pattern=pattern)
    compiled = catalog._pattern(command, "table_name_filter_pattern")
    assert compiled is not None and compiled.fullmatch(matching)
    assert other is None or not compiled.fullmatch(other)


def test_status_errors_render_without_a_traceback_and_others_as_before() -> None:
    status.install()
    status.install()  # idempotent
    try:
        raise status.NotFound("table 'x' not found")
    except status.NotFound as err:
        assert traceback.format_exception(type(err), err, err.__traceback__) == ["NotFound"]
        assert str(err) == "table 'x' not found"
    try:
        raise ValueError("plain")
    except ValueError as err:
        rendered = "".join(traceback.format_exception(err))
        assert rendered.startswith("Traceback") and rendered.endswith("ValueError: plain\n")
