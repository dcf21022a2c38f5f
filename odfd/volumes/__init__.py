"""RFC-018 ``PersistentVolume`` resources: where a ``Dataset`` with ``volume:`` keeps its data.

``spec`` reads a volume (kind ``S3``: endpoint, region, bucket, prefix, credentials from a
SecretSet) into the dataset storage of that bucket prefix; ``attach`` gives a node's workspace
the volumes its datasets were placed on (``storage.placed_storage``), at open and when a volume
is reconciled.
"""
