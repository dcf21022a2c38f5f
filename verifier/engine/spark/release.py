"""Releasing Spark Connect sessions on a thread of their own.

Each isolated Connect session holds a server-side session and a gRPC channel, freed when the
session object is collected (its ``__del__`` closes its client). Collection happens in whatever
thread drops the session, or at any allocation of any thread (the cyclic collector), the event
loop's included, and possibly inside PySpark's or gRPC's locked sections: blocking or taking
locks there can stall or deadlock that thread (``internals.divert_close``). So closing a client
only queues it (``SimpleQueue.put`` is safe there), and one daemon thread releases it.
"""

from __future__ import annotations

import logging
import queue
import threading

from verifier.engine.spark import internals

_queue: queue.SimpleQueue[object] = queue.SimpleQueue()
_lock = threading.Lock()
_thread: threading.Thread | None = None


def release_on_close(client: object) -> None:
    """Closing ``client`` (the collection of its session, or ``stop()``) queues its release.
    Nothing waits for it at exit: the server forgets idle sessions by itself."""
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_serve, name="odfd-connect-release", daemon=True)
            _thread.start()
    internals.divert_close(client, _queue.put)


def release(client: object) -> None:
    """Frees a session's server state and channel in one attempt: the server may be gone
    (crashed, or stopped first at shutdown), and the client's retries would wait for minutes."""
    try:
        internals.release_connect_client(client)
    except Exception as err:  # noqa: BLE001 - gRPC and PySpark errors alike; the server forgets the session anyway
        logging.getLogger(__name__).debug("releasing a Spark Connect session failed: %s", err)


def _serve() -> None:
    while True:
        release(_queue.get())
