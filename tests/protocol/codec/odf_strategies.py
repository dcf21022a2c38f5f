"""Hypothesis strategies for every model type a metadata block can hold, derived from the model.

Built by reading the generated dataclasses' field annotations, so a new field or union variant in
the schemas is covered without editing this file.
"""

from __future__ import annotations

import dataclasses
import enum
import string

from hypothesis import strategies as st

from protocol.identity import DatasetAlias, DatasetId, DatasetRef, Multicodec, Multihash
from protocol.model import ExtraAttributes, Timestamp
from protocol.model import _generated as generated

_INT_BOUNDS = {
    "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
MAX_DEPTH = 3

# Text that exercises YAML quoting: indicators, quotes, newlines, leading/trailing spaces, unicode.
texts = st.text(
    alphabet=st.one_of(
        st.sampled_from(list(string.ascii_letters + string.digits + " -:#'\"\n\t{}[],&*!|>%@`?.~")),
        st.characters(blacklist_categories=["Cs"]),
    ),
    max_size=12,
)
names = st.from_regex(r"[a-z][a-z0-9]{0,6}(\.[a-z0-9]{1,4}){0,2}", fullmatch=True)
multihashes = st.binary(min_size=32, max_size=32).map(lambda d: Multihash(Multicodec.SHA3_256, d))
dataset_ids = st.binary(min_size=32, max_size=32).map(DatasetId.from_public_key)
dataset_refs = st.one_of(
    dataset_ids.map(lambda d: DatasetRef.parse(str(d))),
    names.map(DatasetRef.parse),
    st.tuples(names, names).map(lambda p: DatasetRef.parse(f"{p[0]}/{p[1]}")),
)
dataset_aliases = names.map(DatasetAlias.parse)
timestamps = st.integers(min_value=-(10**18) * 5, max_value=10**18 * 5).map(Timestamp)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), texts),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)),
    max_leaves=6,
)
extra_keys = st.from_regex(r"[a-z0-9.-]{1,8}/[a-zA-Z0-9_-]{1,8}", fullmatch=True)
extra_attributes = st.dictionaries(extra_keys, json_values, min_size=1, max_size=3).map(
    ExtraAttributes
)

_LEAVES = {
    "str": texts,
    "bool": st.booleans(),
    "bytes": st.binary(max_size=16),
    "Multihash": multihashes,
    "DatasetId": dataset_ids,
    "DatasetRef": dataset_refs,
    "DatasetAlias": dataset_aliases,
    "Timestamp": timestamps,
    "ExtraAttributes": extra_attributes,
}


def _annotation(ann: str, owner: str, field: str, depth: int) -> st.SearchStrategy:
    if ann.endswith(" | None"):
        inner = ann[: -len(" | None")]
        if depth >= MAX_DEPTH:
            return st.none()
        return st.none() | _annotation(inner, owner, field, depth)
    if ann.startswith("tuple[") and ann.endswith(", ...]"):
        inner = ann[len("tuple[") : -len(", ...]")]
        size = 0 if depth >= MAX_DEPTH else 2
        return st.lists(_annotation(inner, owner, field, depth + 1), max_size=size).map(tuple)
    if ann == "int":
        low, high = _INT_BOUNDS[generated.INT_FORMATS[(owner, field)]]
        return st.integers(low, high)
    if ann in _LEAVES:
        return _LEAVES[ann]
    return of_type(ann, depth + 1)


def _annotation_text(field: dataclasses.Field[object]) -> str:
    """The field's annotation as written: the generated model postpones annotations."""
    assert isinstance(field.type, str)
    return field.type


def _is_leaf_variant(cls: type) -> bool:
    return all(
        f.type.endswith(" | None") or f.type in _LEAVES or f.type in ("int", "bool")
        for f in dataclasses.fields(cls)
    )


def of_type(name: str, depth: int = 0) -> st.SearchStrategy:
    """Values of the named model type (class, enum or union)."""
    if name in generated.UNION_VARIANTS:
        variants = generated.UNION_VARIANTS[name]
        if depth >= MAX_DEPTH:
            variants = tuple(v for v in variants if _is_leaf_variant(v)) or variants
        return st.one_of([of_type(v.__name__, depth) for v in variants])
    cls = getattr(generated, name)
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return st.sampled_from(list(cls))
    kwargs = {
        f.name: _annotation(_annotation_text(f), name, f.name, depth)
        for f in dataclasses.fields(cls)
    }
    return st.builds(cls, **kwargs)


metadata_blocks = of_type("MetadataBlock")
