"""One module per top-level ``odfd`` command; each exposes ``register(subparsers)``."""
