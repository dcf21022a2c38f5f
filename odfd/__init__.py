"""The odfd node: coordinator (ingest, transform, sync), daemon and command-line interface."""

__version__ = "0.1.0"
