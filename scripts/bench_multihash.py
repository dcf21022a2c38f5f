"""Throughput of Multihash and DatasetId conversions, against the generic ``multiformats`` path.

A pull formats and parses every block, data and checkpoint hash several times, so these paths
must stay cheap. Prints operations per second for each conversion and the speed-up over doing the
same with the ``multiformats`` package, all measured in this run.

    python scripts/bench_multihash.py
"""

from __future__ import annotations

import hashlib
import timeit
from collections.abc import Callable

from multiformats import multibase as mf_multibase
from multiformats import multihash as mf_multihash

from protocol.identity import DatasetId, Multibase, Multihash

ROUNDS = 20_000


def ops_per_second(operation: Callable[[], object]) -> float:
    best = min(timeit.repeat(operation, number=ROUNDS, repeat=5))
    return ROUNDS / best


def main() -> None:
    digest = hashlib.sha3_256(b"odfd").digest()
    value = Multihash.from_digest_sha3_256(b"odfd")
    canonical = value.to_multibase()
    base58 = value.to_multibase(Multibase.BASE58_BTC)
    binary = value.to_bytes()
    dataset_id = DatasetId.new_seeded(b"bench")
    did_text, did_bytes = str(dataset_id), dataset_id.to_bytes()

    cases: list[tuple[str, Callable[[], object], Callable[[], object] | None]] = [
        (
            "Multihash.to_multibase (base16)",
            value.to_multibase,
            lambda: mf_multibase.encode(mf_multihash.wrap(digest, "sha3-256"), "base16"),
        ),
        (
            "Multihash.from_multibase (base16)",
            lambda: Multihash.from_multibase(canonical),
            lambda: mf_multihash.unwrap_raw(mf_multibase.decode(canonical)),
        ),
        (
            "Multihash.from_multibase (base58btc)",
            lambda: Multihash.from_multibase(base58),
            lambda: mf_multihash.unwrap_raw(mf_multibase.decode(base58)),
        ),
        (
            "Multihash.to_bytes",
            value.to_bytes,
            lambda: mf_multihash.wrap(digest, "sha3-256"),
        ),
        (
            "Multihash.from_bytes",
            lambda: Multihash.from_bytes(binary),
            lambda: mf_multihash.unwrap_raw(binary),
        ),
        ("hash(Multihash)", lambda: hash(value), None),
        ("DatasetId.parse (base16)", lambda: DatasetId.parse(did_text), None),
        ("str(DatasetId)", lambda: str(dataset_id), None),
        ("DatasetId.from_bytes", lambda: DatasetId.from_bytes(did_bytes), None),
    ]
    print(f"{'operation':40} {'ops/s':>12} {'vs multiformats':>16}")
    for name, ours, generic in cases:
        ours_rate = ops_per_second(ours)
        ratio = f"{ours_rate / ops_per_second(generic):15.1f}x" if generic else f"{'-':>16}"
        print(f"{name:40} {ours_rate:12,.0f} {ratio}")


if __name__ == "__main__":
    main()
