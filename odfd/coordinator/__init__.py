"""Plans and commits ingest and transform transactions, and orchestrates pulls."""
