"""End to end: two daemons as real processes on loopback. Node A serves a root dataset; node B
is configured with ``odfd apply`` (a ``Mirror`` of it and a derivative ``Dataset`` reading the
mirror). New data ingested on A reaches B, B's derivative transforms it, both audit clean, and
``odfd status``, ``odfd get`` and ``/metrics`` say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.daemon.processes import (
    FAST_SYNC_CONFIG,
    REPO,
    DaemonProcess,
    init_workspace,
    odfd,
    wait_for,
)
from tests.fixtures.manifests import push_source
from tests.fixtures.spark import TEST_SPARK_CONFIG

pytestmark = [pytest.mark.slow, pytest.mark.spark]

EXAMPLES = REPO / "examples" / "leaderboard"

SCORES = (
    """\
$schema: https://opendatafabric.org/schemas/dataset/v1alpha1/Dataset
headers:
  name: match.scores
spec:
  kind: Root
  metadata:
"""
    + push_source(
        """
    kind: NdJson
    schema:
      fields:
        - {name: match_time, type: timestamp}
        - {name: match_id, type: int64}
        - {name: player, type: string}
        - {name: score, type: int64}
""",
        """
    kind: Ledger
    primaryKey: [match_id, player]
""",
    )
    + """\
    - kind: SetVocab
      eventTimeColumn: match_time
"""
)

NODE_B = """\
$schema: https://odfd.dev/schemas/mirror/v1alpha1/Mirror
headers:
  name: match.scores
  labels:
    origin: node-a
spec:
  source: {source}
  every: 1s
---
$schema: https://opendatafabric.org/schemas/dataset/v1alpha1/Dataset
headers:
  name: match.leaderboard
spec:
  kind: Derivative
  metadata:
    - kind: SetTransform
      inputs:
        - datasetRef: match.scores
          alias: scores
      transform:
        kind: Sql
        engine: spark
        query: |
          SELECT match_time, match_id, place, player, score FROM (
            SELECT match_time, match_id, player, score,
                   row_number() OVER (PARTITION BY match_id ORDER BY score DESC, player) AS place
            FROM scores)
          WHERE place <= 3
    - kind: SetVocab
      eventTimeColumn: match_time
"""


def _dataset(status: dict, alias: str) -> dict:
    return next((d for d in status["datasets"] if d["alias"] == alias), {})


def test_two_daemons_mirror_transform_and_audit(tmp_path: Path) -> None:
    a_root, b_root = tmp_path / "a", tmp_path / "b"
    init_workspace(a_root, TEST_SPARK_CONFIG + FAST_SYNC_CONFIG)
    init_workspace(b_root, TEST_SPARK_CONFIG + FAST_SYNC_CONFIG)
    (tmp_path / "a.yaml").write_text(SCORES)
    odfd("apply", "-f", str(tmp_path / "a.yaml"), root=a_root)
    odfd("ingest", "match.scores", str(EXAMPLES / "data" / "1.ndjson"), root=a_root)
    a = DaemonProcess(a_root, tmp_path / "a.log").start()
    b = DaemonProcess(b_root, tmp_path / "b.log")
    try:
        (tmp_path / "b.yaml").write_text(NODE_B.format(source=f"{a.server_url}match.scores"))
        applied = odfd("apply", "-f", str(tmp_path / "b.yaml"), root=b_root, check=False)
        # No daemon yet: the mirror is configured, the derivative waits for its input.
        assert "Mirror/match.scores created (generation 1)" in applied.stderr
        assert (
            "Dataset/match.leaderboard: Failed" in applied.stderr
            and "match.scores" in applied.stderr
        )
        b.start(timeout=120)

        def a_head() -> str:
            return _dataset(a.status(), "match.scores")["head"]

        def caught_up(min_sequence: int) -> dict | None:
            status = b.status()
            scores, board = _dataset(status, "match.scores"), _dataset(status, "match.leaderboard")
            # Audited clean at the head each has now.
            audited = all(
                (d.get("lastAudit") or {}).get("status") == "ok"
                and d["lastAudit"]["head"] == d["head"]
                for d in (scores, board)
            )
            done = (
                scores.get("head") == a_head()
                and (board.get("sequenceNumber") or 0) >= min_sequence
                and audited
            )
            return status if done else None

        # Seed, SetTransform, SetVocab, then SetDataSchema + ExecuteTransform of the first slice.
        caught_up_first = wait_for("B to mirror and transform", lambda: caught_up(4), 300, 1.0)
        first_board = _dataset(caught_up_first, "match.leaderboard")["head"]

        odfd("ingest", "match.scores", str(EXAMPLES / "data" / "2.ndjson"), root=a_root)
        status = wait_for("B to catch up with the new data", lambda: caught_up(5), 300, 1.0)
        scores, board = _dataset(status, "match.scores"), _dataset(status, "match.leaderboard")
        assert board["head"] != first_board
        assert scores["mirrorOf"] == f"{a.server_url}match.scores"
        assert scores["lagBlocks"] == 0 and not scores["failing"] and not board["failing"]
        assert scores["lastSync"]["outcome"] in ("updated", "unchanged")

        resource = json.loads(
            odfd("get", "mirror", "match.scores", "-o", "json", root=b_root).stdout
        )
        assert (
            resource["status"]["phase"] == "Ready" and resource["status"]["observedGeneration"] == 1
        )
        conditions = resource["status"]["conditions"]
        assert conditions["https://odfd.dev/schemas/daemon/v1alpha1/Synced"]["status"] == "True"
        assert conditions["https://odfd.dev/schemas/daemon/v1alpha1/Audited"]["result"] == "ok"
        board_resource = json.loads(
            odfd("get", "dataset", "match.leaderboard", "-o", "json", root=b_root).stdout
        )
        assert board_resource["status"]["phase"] == "Ready"

        metrics = b.metrics()
        assert metrics['odfd_syncs_total{outcome="updated"}'] >= 2
        assert metrics.get('odfd_syncs_total{outcome="failed"}', 0) == 0
        assert metrics['odfd_transforms_total{outcome="updated"}'] >= 2
        assert metrics['odfd_audits_total{scope="integrity",status="ok"}'] >= 4
        assert metrics["odfd_datasets_failing"] == 0 and metrics["odfd_datasets"] == 2
        assert metrics["odfd_sync_bytes_total"] > 0

        # Re-applying the same manifests changes nothing.
        again = odfd("apply", "-f", str(tmp_path / "b.yaml"), root=b_root)
        assert "Mirror/match.scores unchanged (generation 1)" in again.stderr
        assert "Dataset/match.leaderboard unchanged (generation 1)" in again.stderr
        after = b.status()
        assert _dataset(after, "match.leaderboard")["head"] == board["head"]
        assert b.stop() == 0
    finally:
        b.stop()
        a.stop()
