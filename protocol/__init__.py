"""The Open Data Fabric protocol: metadata model, encodings, identities, hashes, transfer protocols.

Nothing in this package touches a workspace on disk; storage and everything above build on it.
"""
