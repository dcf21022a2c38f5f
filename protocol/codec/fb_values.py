"""Conversions of FlatBuffers field bytes into identity values, failing as ``Invalid``."""

from __future__ import annotations

from typing import TypeVar

from protocol.codec.invalid import Invalid
from protocol.errors import OdfError
from protocol.identity import DatasetAlias, DatasetId, DatasetRef, Multihash

E = TypeVar("E")


def _multihash(data: bytes) -> Multihash:
    try:
        return Multihash.from_bytes(data)
    except OdfError as error:
        raise Invalid("", str(error)) from None


def _dataset_id(data: bytes) -> DatasetId:
    try:
        return DatasetId.from_bytes(data)
    except OdfError as error:
        raise Invalid("", str(error)) from None


def _dataset_ref(text: str) -> DatasetRef:
    try:
        return DatasetRef.parse(text)
    except OdfError as error:
        raise Invalid("", str(error)) from None


def _dataset_alias(text: str) -> DatasetAlias:
    try:
        return DatasetAlias.parse(text)
    except OdfError as error:
        raise Invalid("", str(error)) from None


def _enum(members: tuple[E, ...], value: int) -> E:
    if 0 <= value < len(members):
        return members[value]
    raise Invalid("", f"unknown enum value {value}")
