"""CPU seconds of another process (a server a benchmark started: SeaweedFS, the IPFS node), read
from ``/proc`` so a benchmark can print what a pull cost the server beside what it cost odfd
(imported by ``scripts/bench_*.py``, which run with this folder first on ``sys.path``)."""

from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its reaped children so far (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    # Fields after the command (which may hold spaces) start at field 3 ("state").
    fields = stat.rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return (utime + stime + cutime + cstime) / _TICKS


def servers_cpu(pids: list[int]) -> float:
    return sum(process_cpu(pid) for pid in pids)
