"""The daemon's warm-up (``WARM_MODULES``) covers what a thin client's ``-o FORMAT`` output
loads, so a client's first ``odfd sql``/``tail`` in a daemon waits for no import; checked in a
fresh interpreter (this one has loaded everything already)."""

from __future__ import annotations

import json
import subprocess
import sys

from odfd.app.result_formats import TEXT_FORMATS

_PROBE = """
import datetime, importlib, io, json, sys
from odfd.daemon.commands import WARM_MODULES
for module in WARM_MODULES:
    importlib.import_module(module)
import pyarrow as pa
from odfd.app.result_formats import write_result
table = pa.table({
    "t": [datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)],
    "b": [b"x"], "l": [[1, 2]], "s": ["a,b"],
})
late = {}
for fmt in sys.argv[1:]:
    before = set(sys.modules)
    write_result(table, fmt, None, io.StringIO())
    late[fmt] = sorted(
        m for m in set(sys.modules) - before
        if m.split(".")[0] in ("odfd", "protocol", "storage", "verifier", "pyarrow")
    )
print(json.dumps(late))
"""


def test_writing_each_text_format_after_the_warm_up_imports_nothing() -> None:
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE, *TEXT_FORMATS], capture_output=True, text=True, check=True
    )
    late = json.loads(probe.stdout)
    assert set(late) == set(TEXT_FORMATS)
    assert late == {fmt: [] for fmt in TEXT_FORMATS}
