"""Named crash points for the fault tests: a real SIGKILL of this process at a precise step.

``ODFD_CRASH_AT=name[:N][,name[:N]...]`` makes the process kill itself with SIGKILL the N-th time
(default: the first) it reaches the point ``name``. Random kills (tests/daemon/test_fault.py,
tests/storage/test_crash.py) find what timing finds; these hit the narrow windows between two
durable steps every time. Unset (always, outside tests) a point costs one environment lookup.

Points: ``chain.blocks-stored`` (blocks written, head not moved), ``chain.head-moved`` (head
moved, catalog and signature not yet told), ``transaction.objects-stored`` (an ingest's or
transform's data and checkpoint stored, no block yet), ``pull.objects-staged`` (a pull's
blocks stored, its objects fetched and checked but not named), ``pull.objects-fetched`` (a pull's
blocks and objects stored, nothing committed), ``audit.verified`` (an audit ran, its report not yet
recorded).
"""

from __future__ import annotations

import os
import signal

ENV = "ODFD_CRASH_AT"
_reached: dict[str, int] = {}


def crash_point(name: str) -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    for item in spec.split(","):
        point, _, nth = item.strip().partition(":")
        if point != name:
            continue
        _reached[name] = _reached.get(name, 0) + 1
        if _reached[name] >= int(nth or 1):
            os.kill(os.getpid(), signal.SIGKILL)
