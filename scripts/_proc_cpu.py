"""CPU seconds of another process (a server a benchmark started: SeaweedFS, the IPFS node, the
daemon, the Flight SQL server), read from ``/proc`` so a benchmark can print what a run cost the
server beside what it cost odfd (imported by ``scripts/bench_*.py``, which run with this folder
first on ``sys.path``). Memory figures: ``tests.fixtures.proc_memory``."""

from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int, thread: int | None = None, *, children: bool = True) -> float:
    """User + system CPU seconds so far of ``pid`` (all its threads), or of one of its threads
    (the main thread's id is the process's); with ``children``, plus its reaped children's (a
    process-wide count, so leave it off for a thread). 0 once it is gone."""
    stat = f"/proc/{pid}/stat" if thread is None else f"/proc/{pid}/task/{thread}/stat"
    try:
        text = Path(stat).read_text()
    except OSError:
        return 0.0
    # Fields after the command (which may hold spaces) start at field 3 ("state").
    fields = text.rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return (utime + stime + (cutime + cstime if children else 0)) / _TICKS


def servers_cpu(pids: list[int]) -> float:
    return sum(process_cpu(pid) for pid in pids)
