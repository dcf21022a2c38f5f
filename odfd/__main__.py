"""``python -m odfd``: the ``odfd`` command."""

import sys

from odfd.cli.main import run

sys.exit(run())
