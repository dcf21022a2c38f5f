"""Lists every import from an interface (``odfd/cli``, ``daemon``, ``console``, ``server``,
``flight_sql``) into what lies below the application layer: ``storage/``, ``verifier/``,
``odfd.sync``, ``odfd.coordinator``, ``odfd.ingest`` and the protocol's internals (its model,
identities and errors are every layer's vocabulary, so not listed). What is left is a type or an
error of an application function's signature, or a use case still to move into ``odfd/app``
(``docs/architecture.md``); ``tests/test_architecture.py``'s ``APPLICATION_ONLY`` keeps moved
ones out. Run ``.venv/bin/python scripts/interface_imports.py [PREFIX...]``; it reads the source
with ``ast`` (imports inside functions and ``TYPE_CHECKING`` blocks count) and runs nothing."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.test_architecture import _graph, _is_interface

BELOW = ("storage", "verifier", "odfd.sync", "odfd.coordinator", "odfd.ingest")
PROTOCOL_VOCABULARY = ("protocol.model", "protocol.identity", "protocol.errors")


def _below(target: str) -> bool:
    def under(names: tuple[str, ...]) -> bool:
        return any(target == name or target.startswith(name + ".") for name in names)

    if under(BELOW):
        return True
    return target.split(".")[0] == "protocol" and not under(PROTOCOL_VOCABULARY)


def main(prefixes: list[str]) -> None:
    found = sorted(
        (module, line, target)
        for module, edges in _graph().items()
        if _is_interface(module)
        for target, line in edges.items()
        if _below(target)
    )
    for module, line, target in found:
        if not prefixes or any(module.startswith(prefix) for prefix in prefixes):
            print(f"{module}:{line} -> {target}")
    per_interface = Counter(module.split(".")[1] for module, _, _ in found)
    print(
        f"{len(found)} imports: " + ", ".join(f"{k} {v}" for k, v in sorted(per_interface.items()))
    )


if __name__ == "__main__":
    main(sys.argv[1:])
