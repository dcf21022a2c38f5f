"""Query results as the reference's JSON, vectorized over Arrow arrays.

``data.DataWriter`` writes a result's ``data`` (JsonAoS, JsonSoA, JsonAoA) batch by batch, in the
wire form, the canonical form for hashing, or both; ``columns.render_column`` writes one column.
"""
