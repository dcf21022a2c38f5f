"""The node's web console (``/ui``) and what ``odfd inspect`` shows: datasets, lineage, metadata,
mirrors and audits, read from the workspace and, when one runs, the daemon."""
