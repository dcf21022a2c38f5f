"""The DataFusion engine: transforms and queries in-process on Arrow, no JVM."""
