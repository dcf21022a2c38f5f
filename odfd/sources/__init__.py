"""RFC-018 ``Source`` resources: private sources of data that feed datasets without leaving any
trace of themselves (URLs, headers, paths, credentials) in the datasets' public chains.

``spec`` reads a Source's spec; ``values`` brings its ``config`` in from ``SecretSet`` and
``VariableSet`` resources (secrets decrypted only here, at run time); ``render`` makes the
fetch step the ingest runs, and the ``Redactor`` that keeps those values out of every message;
``buffers`` holds what is pushed to a ``RestEndpoint`` source; ``ingest`` runs a Source into a
dataset (the flows' ``Ingest`` task) and keeps its source state with the resource.
"""
