"""Ids and hashes in GraphQL arguments: text that does not parse is an error naming the
argument, on the field's path."""

from __future__ import annotations

from graphql import GraphQLError

from protocol.errors import ParseError
from protocol.identity import DatasetId, Multihash


def dataset_id(text: str) -> DatasetId:
    try:
        return DatasetId.parse(text)
    except ParseError as error:
        raise GraphQLError(f"datasetId {text!r} is not a dataset id: {error}") from None


def multihash(text: str) -> Multihash:
    try:
        return Multihash.from_multibase(text)
    except ParseError as error:
        raise GraphQLError(f"hash {text!r} is not a multihash: {error}") from None
