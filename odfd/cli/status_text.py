"""The human form of the node's status (``odfd status``, ``odfd.app.status``'s document)."""

from __future__ import annotations

from typing import Any

from odfd.config import format_duration


def trust_text(entry: dict[str, Any]) -> str:
    """A short column: ``unsigned``, ``signed``, ``signed*`` (head beyond the signed head) or
    ``FROZEN 2d`` (time since the newest signed head)."""
    if entry["state"] == "unsigned":
        return "unsigned"
    if entry["state"] == "frozen":
        return f"FROZEN {format_duration(int(entry['ageSeconds']))}"
    return "signed" if entry["headIsSigned"] else "signed*"


def render_status(status: dict[str, Any]) -> str:
    """The human form of ``build_status``'s document."""
    lines: list[str] = []
    daemon = status["daemon"]
    if daemon.get("running"):
        lines.append(
            f"daemon: running (pid {daemon['pid']}) since {daemon['startedAt']}; serving at "
            f"{daemon.get('serverUrl')}; syncs: {daemon['syncsRunning']} running, "
            f"{daemon['syncsQueued']} queued; audits: {daemon['auditsQueued']} queued"
        )
    else:
        lines.append("daemon: not running (schedule as stored in the catalog)")
    lines.append("")
    lines.append(
        f"{'DATASET':<28} {'KIND':<10} {'SEQ':>5} {'HEAD':<10} {'TRUST':<12} {'LAST SYNC':<30} "
        f"{'LAG':>4}  AUDIT"
    )
    for d in status["datasets"]:
        sync = d["lastSync"]
        sync_text = "-" if sync is None else f"{sync['outcome']} {sync['at']}"
        audit = d["lastAudit"]
        audit_text = (
            "-" if audit is None else f"{audit['status']} ({audit['scope']}, {audit['at']})"
        )
        if d["failing"]:
            audit_text += f" FAILING: {audit['summary']}" + (" [withheld]" if d["withheld"] else "")
        head = "-" if d["head"] is None else d["head"][-8:]
        lag = "-" if d["lagBlocks"] is None else str(d["lagBlocks"])
        seq = "-" if d["sequenceNumber"] is None else str(d["sequenceNumber"])
        trust = trust_text(d["trust"])
        lines.append(
            f"{d['alias']:<28} {d['kind']:<10} {seq:>5} {head:<10} {trust:<12} {sync_text:<30} "
            f"{lag:>4}  {audit_text}"
        )
        ipns = d["ipns"]
        lines.append(
            f"{'':<28} ipns {ipns['name']}, republished {ipns['lastRepublished'] or 'never'}"
        )
    if status["mirrors"]:
        lines.append("")
        lines.append(
            f"{'MIRROR':<28} {'EVERY':<8} {'STATE':<8} {'NEXT RUN':<22} {'FAILS':>5}  SOURCE"
        )
        for m in status["mirrors"]:
            state = "paused" if m["paused"] else (m["lastOutcome"] or "new")
            lines.append(
                f"{m['name']:<28} {m['every']:<8} {state:<8} {m['nextRunAt'] or '-':<22} "
                f"{m['consecutiveFailures']:>5}  {m['source']}"
            )
            if m["lastError"]:
                lines.append(f"{'':<28} last error: {m['lastError']}")
            if m["trust"]["state"] == "frozen":
                lines.append(
                    f"{'':<28} FROZEN: no newer signed head for {trust_text(m['trust'])[7:]} "
                    f"(bound {m['trust']['freezeAfter']}; newest signed at {m['trust']['signedAt']})"
                )
    return "\n".join(lines)
