"""Replication: pull and push of datasets between this node and HTTP, file and IPFS remotes."""
