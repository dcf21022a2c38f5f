"""FetchStep::EthereumLogs helpers: the filter clause, the node's JSON-RPC API, and logs as rows.

The fetcher itself is ``odfd.ingest.fetch.ethereum``.
"""
