"""The ``odfd`` command-line interface."""
