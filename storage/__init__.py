"""Datasets on disk, content-addressed object and reference stores, the SQLite catalog, chain rules."""
