"""The report for people: one paragraph per dataset, one line per layer, then its findings."""

from __future__ import annotations

import json

from verifier.progress import format_bytes
from verifier.report import (
    CrossEngineResult,
    DatasetReport,
    Finding,
    LayerResult,
    Status,
    VerifyReport,
)

_STATUS_TEXT = {
    Status.OK: "ok",
    Status.FAILED: "FAILED",
    Status.CANNOT_VERIFY: "CANNOT VERIFY",
    Status.NOT_REEXECUTABLE: "not re-executable here",
    Status.SKIPPED: "skipped",
}


def render_text(report: VerifyReport) -> str:
    lines: list[str] = []
    for dataset in report.datasets:
        lines.extend(_dataset_lines(dataset))
        lines.append("")
    lines.append(_summary(report))
    return "\n".join(lines) + "\n"


def _dataset_lines(dataset: DatasetReport) -> list[str]:
    kind = dataset.kind.value.lower() if dataset.kind else "unknown kind"
    facts = [str(dataset.dataset_id), kind]
    if dataset.role.value != "target":
        facts.append(f"audited as {dataset.role.value}")
    if dataset.head is not None:
        facts.append(f"head #{dataset.head.sequence_number} {dataset.head.hash}")
    lines = [f"{dataset.alias} ({', '.join(facts)})"]
    if dataset.block_range is not None and dataset.head is not None:
        first, last = dataset.block_range.first, dataset.block_range.last
        if first.sequence_number != 0 or last.hash != dataset.head.hash:
            lines.append(
                f"  blocks #{first.sequence_number}..#{last.sequence_number} (data and transforms)"
            )
    for layer in dataset.layers:
        lines.append(
            f"  {layer.layer.title:<20} {_STATUS_TEXT[layer.status]:<14} {_checked(layer)}".rstrip()
        )
        if layer.reason:
            lines.append(f"    {layer.reason}")
        for finding in layer.findings:
            lines.extend(_finding_lines(finding))
        if layer.findings_omitted:
            lines.append(
                f"    ... and {layer.findings_omitted} more finding(s) (see --output json)"
            )
        if layer.cross_engine is not None:
            lines.extend(_cross_engine_lines(layer.cross_engine))
    return lines


def _cross_engine_lines(cross: CrossEngineResult) -> list[str]:
    counts = ", ".join(f"{cross.count(r)} {r}" for r in ("agree", "differ", "error"))
    lines = [f"  cross-engine {cross.engine:<7} {counts} (for information, never a failure)"]
    for check in cross.checks:
        lines.append(
            f"    {'=' if check.result == 'agree' else '~'} {check.block}: {check.message}"
        )
        if check.sample:
            lines.extend(_sample_lines(dict(check.sample)))
    return lines


def _checked(layer: LayerResult) -> str:
    parts = []
    for key, value in layer.checked.items():
        parts.append(format_bytes(value) if key == "bytes" else f"{value} {key}")
    return ", ".join(parts)


def _finding_lines(finding: Finding) -> list[str]:
    marker = "x" if finding.status is Status.FAILED else "?"
    lines = [f"    {marker} {finding}"]
    if finding.expected is not None or finding.actual is not None:
        lines.append(f"        expected {finding.expected}, found {finding.actual}")
    sample = (finding.details or {}).get("sample")
    if sample:
        lines.extend(_sample_lines(sample))
    return lines


def _sample_lines(sample: dict) -> list[str]:
    lines = []
    if "unavailable" in sample:
        return [f"        sample unavailable: {sample['unavailable']}"]
    if "columnsDiffer" in sample:
        lines.append(
            f"        columns differ: recorded {sample['columnsDiffer']['recorded']}, "
            f"recomputed {sample['columnsDiffer']['recomputed']}"
        )
    for key, title in (
        ("recordedOnly", "recorded, not reproduced"),
        ("recomputedOnly", "reproduced, not recorded"),
    ):
        rows = sample.get(key) or []
        if rows:
            lines.append(f"        {title} (first {len(rows)}):")
            lines.extend(f"          {json.dumps(row, ensure_ascii=False)}" for row in rows)
    return lines


def _summary(report: VerifyReport) -> str:
    counts = {status: 0 for status in Status}
    for dataset in report.datasets:
        counts[dataset.status] += 1
    verdict = {
        Status.OK: "all verified",
        Status.FAILED: "verification FAILED",
        Status.CANNOT_VERIFY: "some checks could NOT be verified",
        Status.NOT_REEXECUTABLE: "verified, except transforms whose engine this node lacks",
        Status.SKIPPED: "nothing to verify",
    }[report.status]
    detail = ", ".join(f"{n} {status.value}" for status, n in counts.items() if n)
    return f"Result: {verdict} ({len(report.datasets)} dataset(s): {detail})"
