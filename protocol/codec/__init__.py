"""Codecs of the ODF metadata: FlatBuffers blocks, YAML and JSON manifests, the plain tree."""
