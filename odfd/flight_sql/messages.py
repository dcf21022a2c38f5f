"""The Flight SQL messages this server reads and writes, declared for the protobuf runtime.

Flight SQL commands travel as protobuf messages wrapped in ``google.protobuf.Any`` (in a
FlightDescriptor's command, a Ticket, an Action's body or result). A read-only server needs a
dozen of the messages Apache Arrow's ``FlightSql.proto`` defines. Each is declared below by its
fields (name, number, type, cardinality, as the protocol defines them) and the protobuf runtime
(already installed with Spark Connect) builds the message classes from those declarations: the
wire encoding is the maintained runtime's, no generated module has to be kept current, and the
commands this server does not implement are recognised by their type names alone.
"""

from __future__ import annotations

from typing import Any, Final

from google.protobuf import any_pb2, descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message

PACKAGE: Final = "arrow.flight.protocol.sql"
"""The protobuf package of Flight SQL's messages (their ``Any`` type URLs name it)."""

_TYPE_URL_PREFIX: Final = "type.googleapis.com/"

_F = descriptor_pb2.FieldDescriptorProto
_STRING, _BYTES, _BOOL, _UINT32 = _F.TYPE_STRING, _F.TYPE_BYTES, _F.TYPE_BOOL, _F.TYPE_UINT32
_PLAIN, _OPTIONAL, _REPEATED = "plain", "optional", "repeated"

_TABLE_REFERENCE: Final = (
    ("catalog", 1, _STRING, _OPTIONAL),
    ("db_schema", 2, _STRING, _OPTIONAL),
    ("table", 3, _STRING, _PLAIN),
)
"""The fields of the key commands, which name one table."""

#: Message name -> fields (name, number, type, cardinality). ``optional`` is proto3's explicit
#: presence: an omitted catalog filter and an empty one mean different things.
_MESSAGES: Final[dict[str, tuple[tuple[str, int, int, str], ...]]] = {
    "CommandGetSqlInfo": (("info", 1, _UINT32, _REPEATED),),
    "CommandGetCatalogs": (),
    "CommandGetDbSchemas": (
        ("catalog", 1, _STRING, _OPTIONAL),
        ("db_schema_filter_pattern", 2, _STRING, _OPTIONAL),
    ),
    "CommandGetTables": (
        ("catalog", 1, _STRING, _OPTIONAL),
        ("db_schema_filter_pattern", 2, _STRING, _OPTIONAL),
        ("table_name_filter_pattern", 3, _STRING, _OPTIONAL),
        ("table_types", 4, _STRING, _REPEATED),
        ("include_schema", 5, _BOOL, _PLAIN),
    ),
    "CommandGetTableTypes": (),
    "CommandGetPrimaryKeys": _TABLE_REFERENCE,
    "CommandGetExportedKeys": _TABLE_REFERENCE,
    "CommandGetImportedKeys": _TABLE_REFERENCE,
    "CommandStatementQuery": (
        ("query", 1, _STRING, _PLAIN),
        ("transaction_id", 2, _BYTES, _OPTIONAL),
    ),
    "TicketStatementQuery": (("statement_handle", 1, _BYTES, _PLAIN),),
    "CommandPreparedStatementQuery": (("prepared_statement_handle", 1, _BYTES, _PLAIN),),
    "ActionCreatePreparedStatementRequest": (
        ("query", 1, _STRING, _PLAIN),
        ("transaction_id", 2, _BYTES, _OPTIONAL),
    ),
    "ActionCreatePreparedStatementResult": (
        ("prepared_statement_handle", 1, _BYTES, _PLAIN),
        ("dataset_schema", 2, _BYTES, _PLAIN),
        ("parameter_schema", 3, _BYTES, _PLAIN),
    ),
    "ActionClosePreparedStatementRequest": (("prepared_statement_handle", 1, _BYTES, _PLAIN),),
    "DoPutPreparedStatementResult": (("prepared_statement_handle", 1, _BYTES, _OPTIONAL),),
    # Flight SQL's older cancel action: a serialised FlightInfo in, a CancelResult enum out.
    "ActionCancelQueryRequest": (("info", 1, _BYTES, _PLAIN),),
    "ActionCancelQueryResult": (("result", 1, _UINT32, _PLAIN),),
    # Flight's own CancelFlightInfo action (package arrow.flight.protocol) sends these unwrapped,
    # so only their fields matter: an embedded FlightInfo travels as bytes do, an enum as a varint.
    "CancelFlightInfoRequest": (("info", 1, _BYTES, _PLAIN),),
    "CancelFlightInfoResult": (("status", 1, _UINT32, _PLAIN),),
    # Flight's session options (GetSessionOptions, SetSessionOptions), also sent unwrapped. A
    # ``map<string, V>`` is on the wire a repeated entry message (key 1, value 2), and an entry's
    # message value travels as bytes do; of a value's ``oneof`` only the string is read or written.
    "SessionOptionValue": (("string_value", 1, _STRING, _OPTIONAL),),
    "SessionOptionEntry": (("key", 1, _STRING, _PLAIN), ("value", 2, _BYTES, _PLAIN)),
    "GetSessionOptionsResult": (("session_options", 1, _BYTES, _REPEATED),),
    "SetSessionOptionsRequest": (("session_options", 1, _BYTES, _REPEATED),),
    "SetSessionOptionsError": (("value", 1, _UINT32, _PLAIN),),
    "SetSessionOptionsResult": (("errors", 1, _BYTES, _REPEATED),),
}

#: ``CancelStatus`` (Flight) and ``CancelResult`` (Flight SQL) share their numbers.
CANCELLED: Final = 1
NOT_CANCELLABLE: Final = 3

#: Commands and actions the reference's server answers UNIMPLEMENTED, by where they arrive,
#: with its words (which odfd's answers lead with), so a client falls back cleanly.
UNIMPLEMENTED_INFO: Final = {
    "CommandGetCrossReference": "Implement get_flight_info_cross_reference",
    "CommandGetXdbcTypeInfo": "Implement get_flight_info_xdbc_type_info",
    "CommandStatementSubstraitPlan": "Implement get_flight_info_substrait_plan",
}
UNIMPLEMENTED_GET: Final = {
    "CommandGetCrossReference": "Implement do_get_cross_reference",
    "CommandGetXdbcTypeInfo": "Implement do_get_xdbc_type_info",
}
UNIMPLEMENTED_PUT: Final = {
    "CommandStatementUpdate": "Implement do_put_statement_update",
    "CommandPreparedStatementUpdate": "Implement do_put_prepared_statement_update",
    "CommandStatementSubstraitPlan": "Implement do_put_substrait_plan",
    "CommandStatementIngest": "do_put_statement_ingest has no default implementation",
}
UNIMPLEMENTED_ACTIONS: Final = {
    "CreatePreparedSubstraitPlan": "Implement do_action_create_prepared_substrait_plan",
    "BeginTransaction": "Implement do_action_begin_transaction",
    "EndTransaction": "Implement do_action_end_transaction",
    "BeginSavepoint": "Implement do_action_begin_savepoint",
    "EndSavepoint": "Implement do_action_end_savepoint",
}


def type_url(name: str) -> str:
    """The ``Any`` type URL of Flight SQL message ``name`` (what the reference's refusals show)."""
    return f"{_TYPE_URL_PREFIX}{PACKAGE}.{name}"


def _file_descriptor() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="odfd/flight_sql/messages.proto", package=PACKAGE, syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        message = file.message_type.add(name=name)
        for field_name, number, kind, cardinality in fields:
            field = message.field.add(name=field_name, number=number, type=kind)
            field.label = _F.LABEL_REPEATED if cardinality == _REPEATED else _F.LABEL_OPTIONAL
            if cardinality == _OPTIONAL:  # proto3 presence: a synthetic one-field oneof
                field.proto3_optional = True
                field.oneof_index = len(message.oneof_decl)
                message.oneof_decl.add(name=f"_{field_name}")
    return file


_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(_file_descriptor())
_CLASSES: Final[dict[str, type[Message]]] = {
    name: message_factory.GetMessageClass(_POOL.FindMessageTypeByName(f"{PACKAGE}.{name}"))
    for name in _MESSAGES
}


class MessageError(ValueError):
    """Bytes that are not the Flight SQL message they should be."""


def new(name: str, **fields: Any) -> Any:
    """A Flight SQL message ``name`` with ``fields`` set (typed ``Any``: built at run time)."""
    return _CLASSES[name](**fields)


def name_of(message: Message) -> str:
    """The message's Flight SQL name, e.g. ``CommandStatementQuery``."""
    return message.DESCRIPTOR.name


def pack(message: Message) -> bytes:
    """``message`` wrapped in ``google.protobuf.Any``, serialised."""
    wrapper = any_pb2.Any(
        type_url=type_url(message.DESCRIPTOR.name),
        value=message.SerializeToString(),
    )
    return wrapper.SerializeToString()


def parse(name: str, data: bytes) -> Any:
    """Message ``name`` from its serialised fields (not wrapped in an ``Any``). Raises
    :class:`MessageError`."""
    message = _CLASSES[name]()
    try:
        message.ParseFromString(data)
    except DecodeError:
        raise MessageError(f"a malformed {name}") from None
    return message


def unpack(data: bytes) -> tuple[str, Any]:
    """The Flight SQL message in an ``Any``: its name and, for the messages declared here, the
    decoded message (``None`` for other Flight SQL names). Raises :class:`MessageError` for
    bytes that are no ``Any`` of a Flight SQL message."""
    wrapper = any_pb2.Any()
    try:
        wrapper.ParseFromString(data)
    except DecodeError:
        raise MessageError("not a protobuf Any message") from None
    full_name = wrapper.type_url.rpartition("/")[2]
    package, _, name = full_name.rpartition(".")
    if package != PACKAGE or not name:
        shown = wrapper.type_url or "no type URL"
        raise MessageError(f"not a Flight SQL command ({shown})")
    kind = _CLASSES.get(name)
    if kind is None:
        return name, None
    message = kind()
    try:
        message.ParseFromString(wrapper.value)
    except DecodeError:
        raise MessageError(f"a malformed {name}") from None
    return name, message
