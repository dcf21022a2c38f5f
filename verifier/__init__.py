"""Integrity and reproducibility checks, and the Spark engine that (re-)executes ODF transforms."""
