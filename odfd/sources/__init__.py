"""RFC-018 ``Source`` resources: private sources of data that feed datasets without leaving any
trace of themselves (URLs, headers, paths, credentials) in the datasets' public chains.

``spec`` reads a Source's spec (its ``config`` values come from ``SecretSet`` and
``VariableSet`` resources through ``odfd.app.value_refs``, secrets decrypted only at run time);
``render`` makes the
fetch step the ingest runs, and the ``Redactor`` that keeps those values out of every message;
``buffers`` holds what is pushed to a ``RestEndpoint`` source; ``ingest`` runs a Source into a
dataset (the flows' ``Ingest`` task) and keeps its source state with the resource.
"""
