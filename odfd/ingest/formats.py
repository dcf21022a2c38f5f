"""Reading pushed data in another format than the source declares (``odfd ingest --input-format``).

As the reference's ``get_compatible_read_config``: the same format keeps the source's read step;
another one gets that format's defaults with the source's ``schema`` carried over, and a CSV
gets a header row only when there is no schema to name its columns. Unlike the reference, a
source's deprecated ``ddlSchema`` is carried over too, so the data is still coerced into it.
"""

from __future__ import annotations

from typing import Any

from odfd.ingest.errors import UnsupportedError
from protocol.model import (
    ReadStepCsv,
    ReadStepEsriShapefile,
    ReadStepGeoJson,
    ReadStepJson,
    ReadStepNdGeoJson,
    ReadStepNdJson,
    ReadStepParquet,
)

#: ``--input-format`` names and the read step each stands for.
FORMATS: dict[str, type] = {
    "csv": ReadStepCsv,
    "json": ReadStepJson,
    "ndjson": ReadStepNdJson,
    "geojson": ReadStepGeoJson,
    "ndgeojson": ReadStepNdGeoJson,
    "parquet": ReadStepParquet,
    "shapefile": ReadStepEsriShapefile,
}


def read_step_for(base: Any, input_format: str) -> Any:
    """The read step to read data in ``input_format`` for a source whose read step is ``base``."""
    kind = FORMATS.get(input_format.lower())
    if kind is None:
        raise UnsupportedError(
            f"--input-format {input_format!r} is not one of {', '.join(sorted(FORMATS))}"
        )
    if isinstance(base, kind):
        return base
    schema = getattr(base, "schema", None)
    ddl_schema = getattr(base, "ddl_schema", None)
    if kind is ReadStepCsv:
        return ReadStepCsv(
            schema=schema, ddl_schema=ddl_schema, header=schema is None and ddl_schema is None
        )
    return kind(schema=schema, ddl_schema=ddl_schema)
