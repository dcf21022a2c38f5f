"""Arrow type tests the answer's writers share (its Parquet schema and its data's texts)."""

from __future__ import annotations

import pyarrow as pa


def is_list(kind: pa.DataType) -> bool:
    """Any of Arrow's list types (plain, large, fixed-size or view): each is written as a list."""
    return bool(
        pa.types.is_list(kind)
        or pa.types.is_large_list(kind)
        or pa.types.is_fixed_size_list(kind)
        or pa.types.is_list_view(kind)
        or pa.types.is_large_list_view(kind)
    )
