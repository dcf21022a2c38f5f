"""The Spark engine: ingest and transform execution, slices, checkpoints, replay of transforms."""
