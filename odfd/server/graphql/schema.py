"""The executable schema: the SDL built once, each resolver set on its field, and the scalars
serialised as the reference writes them (hashes in multibase, times in RFC 3339, ids as text)."""

from __future__ import annotations

from functools import cache
from typing import Any

from graphql import GraphQLObjectType, GraphQLScalarType, GraphQLSchema, build_schema

from odfd.server.graphql.resolvers import RESOLVERS
from odfd.server.graphql.sdl import SDL
from protocol.identity import Multihash
from protocol.model import Timestamp


@cache
def schema() -> GraphQLSchema:
    built = build_schema(SDL)
    for path, resolver in RESOLVERS.items():
        type_name, field_name = path.split(".")
        owner = built.type_map[type_name]
        assert isinstance(owner, GraphQLObjectType), path
        owner.fields[field_name].resolve = resolver
    for named in built.type_map.values():
        if isinstance(named, GraphQLScalarType) and not named.name.startswith("__"):
            if named.name not in ("String", "Int", "Float", "Boolean", "ID"):
                named.serialize = named.coerce_output_value = _scalar  # type: ignore[method-assign]
    return built


def _scalar(value: Any) -> str:
    if isinstance(value, Multihash):
        return value.to_multibase()
    if isinstance(value, Timestamp):
        return value.to_rfc3339()
    return str(value)
