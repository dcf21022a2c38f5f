"""Transfer protocols: how dataset blocks and files move between nodes (HTTP, IPFS)."""
