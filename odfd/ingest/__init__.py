"""Ingest into root datasets: fetch, prepare, read, preprocess, merge, event time and watermarks."""
