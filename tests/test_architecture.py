"""The layering of the code, read from the source with ``ast``: imports only point down
protocol → storage → verifier → odfd, inside ``odfd/`` down its own layers (the CLI above the
daemon, the daemon above the web console, the console above the servers, those above the
application layer, that above the domain services, configuration and errors at the bottom), and
no module imports itself back through others.

Every import counts, at module level or inside a function, ``TYPE_CHECKING`` blocks included: a
lazy or typing-only import still ties the two modules together.
"""

from __future__ import annotations

import ast
import functools
import gc
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("protocol", "storage", "verifier", "odfd")
"""Bottom first: a module may import its own layer and the ones before it."""

ODFD_LAYERS: tuple[tuple[str, ...], ...] = (
    ("odfd", "odfd.config", "odfd.errors"),
    ("odfd.coordinator", "odfd.sync", "odfd.ingest"),
    ("odfd.app", "odfd.flows", "odfd.sources", "odfd.volumes", "odfd.webhooks"),
    ("odfd.server", "odfd.flight_sql"),
    ("odfd.console",),
    ("odfd.daemon",),
    ("odfd.cli", "odfd.__main__"),
)
"""The layers inside ``odfd/``, bottom first (``docs/architecture.md``): each entry names the
packages or modules of one layer; a module belongs to the longest name it starts with."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for layer in LAYERS
        for path in sorted((ROOT / layer).rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def _imported(module: str, path: Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """Our modules that ``module`` imports (the longest known prefix of each name), with lines."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import sub` imports the submodule; `from pkg import name`, the package.
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        for name in names:
            parts = name.split(".")
            for end in range(len(parts), 0, -1):
                candidate = ".".join(parts[:end])
                if candidate in known:
                    if candidate != module:
                        yield candidate, node.lineno
                    break


@functools.cache
def _graph() -> dict[str, dict[str, int]]:
    modules = _modules()
    known = set(modules)
    graph: dict[str, dict[str, int]] = {}
    # CPython 3.11's AST constructor fails ("recursion depth mismatch") when a garbage
    # collection runs finalizers of earlier tests' objects in the middle of a parse.
    gc.collect()
    gc.disable()
    try:
        for module, path in modules.items():
            edges = graph.setdefault(module, {})
            for target, line in _imported(module, path, known):
                edges.setdefault(target, line)
    finally:
        gc.enable()
    return graph


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def test_imports_only_point_down_the_layers() -> None:
    upward = [
        f"{module} (line {line}) imports {target}"
        for module, edges in _graph().items()
        for target, line in edges.items()
        if _layer(target) > _layer(module)
    ]
    assert upward == [], "upward imports:\n" + "\n".join(upward)


def _odfd_layer(module: str) -> int:
    best = (-1, -1)
    for rank, names in enumerate(ODFD_LAYERS):
        for name in names:
            if module == name or module.startswith(name + "."):
                best = max(best, (len(name), rank))
    return best[1]


def test_every_odfd_module_has_a_layer() -> None:
    """A new top-level module or package of ``odfd/`` is placed in a layer, not left outside."""
    bottom = set(ODFD_LAYERS[0])
    unplaced = sorted(
        m for m in _graph() if m.split(".")[0] == "odfd" and _odfd_layer(m) == 0 and m not in bottom
    )
    assert unplaced == [], "odfd modules outside the layers: " + ", ".join(unplaced)


def test_imports_inside_odfd_only_point_down_its_layers() -> None:
    upward = [
        f"{module} (line {line}) imports {target}"
        for module, edges in _graph().items()
        if module.split(".")[0] == "odfd"
        for target, line in edges.items()
        if target.split(".")[0] == "odfd" and _odfd_layer(target) > _odfd_layer(module)
    ]
    assert upward == [], "upward imports inside odfd:\n" + "\n".join(upward)


def test_no_import_circles() -> None:
    graph = _graph()
    circles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                circles.append([*path[path.index(target) :], target])
            elif target not in state:
                visit(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert circles == [], "import circles:\n" + "\n".join(" -> ".join(c) for c in circles)


def test_the_check_sees_imports() -> None:
    """The graph is not vacuous: known edges of each kind are found."""
    graph = _graph()
    assert "protocol.errors" in graph["storage.errors"]  # from-import
    assert "storage.ipfs_client" in graph["storage.stores.ipfs"]
    assert "protocol.model._enums_generated" in graph["protocol.model.resource"]
    assert all(_layer(m) == 0 for m in graph["protocol.model._generated"])
    assert "odfd.app.node" in graph["odfd.cli.workspace_args"]  # an import inside a function
    assert (
        _odfd_layer("odfd.cli.main")
        > _odfd_layer("odfd.daemon.service")
        > _odfd_layer("odfd.console.api")
        > _odfd_layer("odfd.server.app")
        > _odfd_layer("odfd.app.node")
        > _odfd_layer("odfd.sync.pull")
        > _odfd_layer("odfd.config")
    )


# --- use cases in the application layer ---------------------------------------------------------

INTERFACES = ("odfd.cli", "odfd.daemon", "odfd.console", "odfd.server", "odfd.flight_sql")
"""The layers that only translate requests into use cases and results into responses."""
USE_CASE_SERVICES = {
    "odfd.sync.pull": "odfd.app.pull",
    "odfd.sync.push": "odfd.app.push",
    "odfd.coordinator.transform": "odfd.app.pull",
    "verifier.audit": "odfd.app.verify",
}
"""Domain services that do one use case's work, each with the application module every interface
calls instead: ``odfd pull`` and the daemon's mirror syncs share one pull, ``odfd pull
DERIVATIVE`` and the daemon's derivative updates one transform (its retry and write log),
``odfd verify`` and the daemon's audits one verify (``docs/architecture.md``)."""


def _is_interface(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in INTERFACES)


def test_interfaces_reach_pull_push_and_verify_through_the_application_layer() -> None:
    found = [
        f"{module} (line {line}) imports {target}: call {USE_CASE_SERVICES[target]}"
        for module, edges in _graph().items()
        if _is_interface(module)
        for target, line in edges.items()
        if target in USE_CASE_SERVICES
    ]
    assert found == [], "interfaces past the application layer:\n" + "\n".join(found)


def test_the_use_case_check_sees_the_application_layer_import_them() -> None:
    """Not vacuous: each service named is a module the application layer imports."""
    graph = _graph()
    for service, application in USE_CASE_SERVICES.items():
        assert service in graph[application]
    assert _is_interface("odfd.daemon.audits") and not _is_interface("odfd.app.mirror_sync")
    assert _is_interface("odfd.daemon.derivatives")


APPLICATION_ONLY = {
    "odfd.sync.objects": "odfd.app.receive_push",
    "odfd.sync.target": "odfd.app.receive_push",
    "odfd.sync.walk": "odfd.app.receive_push",
    "odfd.sync.transport.settings": "odfd.app.node",
    "odfd.coordinator.commit": "odfd.app.ingest",
    "odfd.coordinator.schema": "odfd.app.push_ingest",
    "odfd.ingest.errors": "odfd.app.push_ingest",
    "verifier.engine.spark.session": "odfd.app.engine_status",
    "verifier.engine.datafusion": "odfd.app.live_plan",
    "verifier.engine.errors": "odfd.app.live_plan",
    "storage.chain.metadata_chain": "odfd.app.dataset_log",
    "odfd.coordinator.compact": "odfd.app.history",
    "odfd.sync.pins": "odfd.app.mirrors",
    "odfd.sync.transport.url": "odfd.app.mirrors",
    "verifier.engine.registry": "odfd.app.node",
    "verifier.report": "odfd.app.verify",
    "storage.orphans": "odfd.app.recovery",
    "storage.scratch": "odfd.app.catalog_read",
    "verifier.engine.cancel": "odfd.app.engine_jobs",
    "verifier.engine.spark.choice": "odfd.app.warm_engine",
    "verifier.engine.spark.connect_server": "odfd.app.warm_engine",
    "verifier.engine.spark.settings": "odfd.app.warm_engine",
    "storage.chain.rules": "odfd.app.derivative_inputs",
    "storage.ipfs_client": "odfd.app.ipfs_status",
    "storage.catalog.flow_runs": "odfd.app.flow_history",
    "storage.catalog.webhook_deliveries": "odfd.app.flow_history",
    "storage.keys": "odfd.app.workspace_init",
    "odfd.sync.repos": "odfd.app.repos",
    "odfd.sync.progress": "odfd.app.transfer_progress",
    "verifier.selection": "odfd.app.verify",
    "storage.dataset_storage": "odfd.app.served_objects",
    "storage.stores.localfs": "odfd.app.served_objects",
    "storage.chain": "odfd.app.pull_intervals",
    "protocol.transfer.smart.tarball": "odfd.app.pull_intervals",
    "verifier.engine.inputs": "odfd.app.graphql_chain",
    "protocol.query.schema": "odfd.app.graphql_chain",
    "verifier.progress": "odfd.app.progress_display",
    "verifier.engine.names": "odfd.app.engine_names",
    "protocol.hashing": "odfd.app.file_hashes",
    "protocol.codec.flatbuffers": "odfd.app.block_files",
    "protocol.codec.yaml": "odfd.app.block_text",
    "protocol.codec.json": "odfd.app.block_text",
    "protocol.query.json_text": "odfd.app.request_json",
    "storage.catalog.reader": "odfd.app.catalog_version",
    "odfd.sync.transport.http_errors": "odfd.app.manifest_urls",
    "protocol.codec.yaml_emitter": "odfd.app.yaml_documents",
}
"""Internals of a use case's domain service that no interface names, each with the application
module that holds the use case: the server's push and upload handlers translate messages into
``odfd.app.receive_push``'s calls rather than verifying, staging and committing blocks themselves;
``odfd ingest`` and ``POST /{dataset}/ingest`` stage their data where ``odfd.app.ingest`` says and
hear of refused data as ``odfd.app.push_ingest``'s error; the console asks
``odfd.app.engine_status`` whether Spark runs; the daemon's mirror schedule hands the node to
``odfd.app.mirror_sync``, whose transport settings ``odfd.app.node`` builds; Flight SQL plans and
streams through ``odfd.app.live_plan``, which names the engine and its errors, and the daemon loads
the engine through it; ``odfd log`` reads a chain through ``odfd.app.dataset_log``; ``odfd mirror remove`` and the
daemon release a removed mirror's pin, and the daemon finds a mirror's peer, through
``odfd.app.mirrors``; the node's engines come built from ``odfd.app.node``, and the daemon's
audits summarize a report with ``odfd.app.verify``; ``odfd compact`` asks
``odfd.app.history`` for its options and the compaction; every command settles orphan dataset
folders through ``odfd.app.recovery``, and ``odfd log/list/status`` read the catalog (sweeping
dead processes' staging first) through ``odfd.app.catalog_read``; the daemon ties a task's engine
jobs to it with ``odfd.app.engine_jobs`` and starts and stops its warm Spark Connect server through
``odfd.app.warm_engine``; it finds the local derivatives behind their inputs with
``odfd.app.derivative_inputs``; the console asks ``odfd.app.ipfs_status`` about the IPFS node;
flow runs and webhook deliveries are listed by ``odfd.app.flow_history`` and recorded by the
runner the daemon gets from ``odfd.app.node_flows``; ``odfd init`` makes the workspace and its
identity with ``odfd.app.workspace_init``; ``odfd repo`` and ``odfd push`` check repository
names, URLs and their arguments through ``odfd.app.repos`` and ``odfd.app.push``; ``odfd pull``
and ``odfd push`` ask ``odfd.app.transfer_progress`` for their progress lines by a flag; ``odfd
verify`` checks ``--from``/``--to`` with ``odfd.app.verify``; the Simple Transfer server asks
``odfd.app.served_objects`` where an object is read from, and the Smart Transfer server reads,
checks and packs a pull's interval of a chain with ``odfd.app.pull_intervals``; a GraphQL
resolver has a ``SetDataSchema``'s schema rendered by ``odfd.app.graphql_chain`` (a module here
covers its submodules; the first rule that matches names the module to call)."""


def _application_only(target: str) -> str | None:
    """The application module to call instead of importing ``target``; None: no such rule."""
    for internal, application in APPLICATION_ONLY.items():
        if target == internal or target.startswith(internal + "."):
            return application
    return None


def _reaches_past_the_application_layer(graph: dict[str, dict[str, int]]) -> list[str]:
    return [
        f"{module} (line {line}) imports {target}: call {_application_only(target)}"
        for module, edges in graph.items()
        if _is_interface(module)
        for target, line in edges.items()
        if _application_only(target) is not None
    ]


def test_interfaces_do_not_reach_into_use_case_internals() -> None:
    found = _reaches_past_the_application_layer(_graph())
    assert found == [], "interfaces past the application layer:\n" + "\n".join(found)


def test_the_internals_check_sees_them_imported() -> None:
    """Not vacuous: each internal is imported by its application module, and an interface
    importing one is caught."""
    graph = _graph()
    for internal, application in APPLICATION_ONLY.items():
        assert any(t == internal or t.startswith(internal + ".") for t in graph[application])
    probe = {"odfd.server.probe": {"odfd.sync.walk": 3}, "odfd.app.probe": {"odfd.sync.walk": 4}}
    assert _reaches_past_the_application_layer(probe) == [
        "odfd.server.probe (line 3) imports odfd.sync.walk: call odfd.app.receive_push"
    ]
    recovery = {
        "odfd.cli.probe": {"storage.orphans": 5, "storage.scratch": 6},
        "odfd.daemon.probe": {"verifier.engine.cancel": 7, "verifier.engine.spark.choice": 8},
        "odfd.app.probe": {"storage.orphans": 9, "verifier.engine.cancel": 10},
    }
    assert _reaches_past_the_application_layer(recovery) == [
        "odfd.cli.probe (line 5) imports storage.orphans: call odfd.app.recovery",
        "odfd.cli.probe (line 6) imports storage.scratch: call odfd.app.catalog_read",
        "odfd.daemon.probe (line 7) imports verifier.engine.cancel: call odfd.app.engine_jobs",
        "odfd.daemon.probe (line 8) imports verifier.engine.spark.choice: call odfd.app.warm_engine",
    ]
    moved = {
        "odfd.cli.probe": {"odfd.sync.repos": 11, "odfd.sync.progress": 12, "storage.keys": 13},
        "odfd.server.probe": {"storage.chain": 14, "storage.chain.rules": 15},
        "odfd.app.probe": {"storage.chain": 16, "storage.stores.localfs": 17},
        "odfd.server.graphql.probe": {"verifier.engine.inputs": 18, "protocol.query.schema": 19},
        "odfd.console.probe": {"protocol.query": 20, "verifier.engine": 21},
        "odfd.cli.status_line": {"verifier.progress": 22, "verifier.engine.names": 23},
        "odfd.cli.commands.block": {
            "protocol.codec.yaml": 24,
            "protocol.codec.yaml_emitter": 25,
            "protocol.hashing.lanes": 26,
        },
        "odfd.flight_sql.probe": {"storage.catalog.reader": 27, "storage.catalog": 28},
    }
    assert _reaches_past_the_application_layer(moved) == [
        "odfd.cli.probe (line 11) imports odfd.sync.repos: call odfd.app.repos",
        "odfd.cli.probe (line 12) imports odfd.sync.progress: call odfd.app.transfer_progress",
        "odfd.cli.probe (line 13) imports storage.keys: call odfd.app.workspace_init",
        "odfd.server.probe (line 14) imports storage.chain: call odfd.app.pull_intervals",
        "odfd.server.probe (line 15) imports storage.chain.rules: call odfd.app.derivative_inputs",
        "odfd.server.graphql.probe (line 18) imports verifier.engine.inputs: "
        "call odfd.app.graphql_chain",
        "odfd.server.graphql.probe (line 19) imports protocol.query.schema: "
        "call odfd.app.graphql_chain",
        "odfd.cli.status_line (line 22) imports verifier.progress: call odfd.app.progress_display",
        "odfd.cli.status_line (line 23) imports verifier.engine.names: call odfd.app.engine_names",
        "odfd.cli.commands.block (line 24) imports protocol.codec.yaml: call odfd.app.block_text",
        "odfd.cli.commands.block (line 25) imports protocol.codec.yaml_emitter: "
        "call odfd.app.yaml_documents",
        "odfd.cli.commands.block (line 26) imports protocol.hashing.lanes: "
        "call odfd.app.file_hashes",
        "odfd.flight_sql.probe (line 27) imports storage.catalog.reader: "
        "call odfd.app.catalog_version",
    ]


USE_CASE_ENTRIES = {
    "odfd.sync.pull": {"pull", "pull_from_remotes"},
    "odfd.sync.push": {"push"},
    "verifier.audit": {"verify"},
}
"""The functions of each service that do the use case's work (its option and result types may be
named anywhere above it)."""


def _entries_imported(tree: ast.AST) -> Iterator[tuple[int, str, str]]:
    """Where ``tree`` imports a use case's entry function, or a service module whole: the line,
    the service and what is imported."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in USE_CASE_ENTRIES and not node.level:
            for alias in node.names:
                if alias.name in USE_CASE_ENTRIES[node.module]:
                    yield node.lineno, node.module, f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in USE_CASE_ENTRIES:
                    yield node.lineno, alias.name, alias.name


def test_each_use_case_has_one_implementation() -> None:
    """Only ``odfd.app.pull`` runs a replication pull, ``odfd.app.push`` a push and
    ``odfd.app.verify`` an audit: the daemon's mirror syncs and audits call them, no third copy
    (``odfd.sync`` itself aside: ``pull_from_remotes`` is a pull from each recorded remote)."""
    found = [
        f"{module} (line {line}) imports {what}: call {USE_CASE_SERVICES[service]}"
        for module, path in _modules().items()
        if module.split(".")[0] == "odfd"
        and module not in USE_CASE_SERVICES.values()
        and not module.startswith("odfd.sync.")
        for line, service, what in _entries_imported(ast.parse(path.read_text(), str(path)))
    ]
    assert found == [], "use cases run outside their application module:\n" + "\n".join(found)
    flagged = "from odfd.sync.pull import PullOptions, pull\nimport verifier.audit\n"
    assert list(_entries_imported(ast.parse(flagged))) == [
        (1, "odfd.sync.pull", "odfd.sync.pull.pull"),
        (2, "verifier.audit", "verifier.audit"),
    ]


# --- the composition root ------------------------------------------------------------------------

CONFIG_READER = "odfd.app.node"
"""The one module that parses ``config.toml``: the node is built there once per process and
everything else receives what it needs (``docs/architecture.md``)."""


def _calls_of(tree: ast.AST, name: str) -> list[int]:
    """The lines where ``tree`` calls a function called ``name`` (plainly or as an attribute)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == name)
            or (isinstance(node.func, ast.Attribute) and node.func.attr == name)
        )
    ]


def test_the_configuration_is_parsed_in_one_place() -> None:
    """``load_config`` has one caller outside the tests: the composition root."""
    callers = [
        f"{module} (line {line})"
        for module, path in _modules().items()
        for line in _calls_of(ast.parse(path.read_text(), str(path)), "load_config")
    ]
    assert len(callers) == 1 and callers[0].startswith(CONFIG_READER + " "), (
        "load_config called outside the composition root:\n" + "\n".join(callers)
    )
    assert _calls_of(ast.parse("x = config.load_config(p)\nload_config(q)"), "load_config") == [
        1,
        2,
    ]


# --- remote URL schemes ---------------------------------------------------------------------------

TRANSPORTS = "odfd.sync.transport"
"""The one package that looks at a remote URL's scheme: parsing a URL gives a transport, and
everything else asks the transport (``docs/development.md``)."""
REMOTE_SCHEMES = frozenset(
    {"http", "https", "odf+http", "odf+https", "file", "s3", "s3+http", "s3+https", "ipfs", "ipns"}
)
NOT_REMOTES = {
    "odfd.ingest": "the URLs of ingest sources' fetch steps (files, HTTP, Ethereum RPC)",
    "odfd.cli.manifest_source": "where `odfd add` reads a manifest from (a path or http(s) URL)",
    "odfd.webhooks": "a WebhookTarget's URL: the http(s) endpoint events are posted to",
    "odfd.volumes": "a PersistentVolume's S3 endpoint, made into the bucket URL storage reads",
}
"""Modules whose URLs are not remotes, so they may test a scheme, each with the reason."""


def _names_a_scheme(node: ast.expr) -> bool:
    """A string constant (or a tuple, list or set holding one) that is a remote scheme, a scheme
    prefix (``odf+``, ``s3+``) or the start of a URL (``ipfs://``, ``http:``)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_scheme(element) for element in node.elts)
    if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
        return False
    text = node.value.lower()
    head, colon, _ = text.partition(":")
    return (
        text in REMOTE_SCHEMES or text in ("odf+", "s3+") or bool(colon and head in REMOTE_SCHEMES)
    )


def _scheme_tests(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Where code reads a URL's ``.scheme``, compares with a scheme (``==``, ``in``, ``match``),
    or tests a URL's start or end against one (``startswith("ipfs://")``, ``removeprefix("odf+")``).
    Building a URL (``f"ipfs://{cid}"``) or telling a URL from a name (``"://" in text``) is not
    testing a scheme."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "scheme":
            yield node.lineno, "reads a URL's scheme"
        elif isinstance(node, ast.Compare) and any(
            _names_a_scheme(operand) for operand in (node.left, *node.comparators)
        ):
            yield node.lineno, "compares with a URL scheme"
        elif isinstance(node, ast.MatchValue) and _names_a_scheme(node.value):
            yield node.lineno, "matches a URL scheme"
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith", "removeprefix", "removesuffix")
            and any(_names_a_scheme(argument) for argument in node.args)
        ):
            yield node.lineno, f"{node.func.attr}() with a URL scheme"


def _exempt(module: str) -> bool:
    return any(
        module == prefix or module.startswith(prefix + ".") for prefix in (TRANSPORTS, *NOT_REMOTES)
    )


def test_no_module_outside_the_transports_tests_a_url_scheme() -> None:
    """Pull, push, search, the daemon's probe and scheduler, the CLI: none branches on a remote
    URL's scheme; they ask the transport ``odfd.sync.transport.url.parse_remote`` gives. The
    check covers ``odfd/`` (``storage/`` holds one store per kind of remote, each parsing its own
    URLs, e.g. ``storage.s3_settings``)."""
    modules = {name: path for name, path in _modules().items() if name.split(".")[0] == "odfd"}
    stale = [p for p in NOT_REMOTES if not any(m == p or m.startswith(p + ".") for m in modules)]
    assert stale == [], f"exempt modules that no longer exist: {stale}"
    found = [
        f"{module} (line {line}) {what}"
        for module, path in modules.items()
        if not _exempt(module)
        for line, what in _scheme_tests(ast.parse(path.read_text(), str(path)))
    ]
    assert found == [], "URL schemes tested outside the transports:\n" + "\n".join(found)


def test_the_check_sees_scheme_tests() -> None:
    flagged = """
urlsplit(url).scheme
if scheme in ("http", "https"): pass
if remote.kind == "ipns": pass
url.startswith("ipfs://")
text.lower().removeprefix("odf+")
match scheme:
    case "s3": pass
"""
    assert sorted(line for line, _ in _scheme_tests(ast.parse(flagged))) == [2, 3, 4, 5, 6, 8]
    ignored = """
url = f"ipfs://{cid}"
if "://" in text: pass
sections = {"ipfs": 1, "s3": 2}
if kind == "Checkpoint": pass
"""
    assert list(_scheme_tests(ast.parse(ignored))) == []
    assert _exempt("odfd.sync.transport.url") and not _exempt("odfd.sync.pull")


#: Where each engine lives: only these packages may use its library, or tell engines apart by name.
ENGINE_PACKAGES = ("verifier.engine.spark", "verifier.engine.datafusion")
ENGINE_LIBRARIES = ("pyspark", "py4j", "datafusion")


def _in_engine_package(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in ENGINE_PACKAGES)


def _outside_engine_packages() -> Iterator[tuple[str, ast.Module]]:
    for module, path in _modules().items():
        if not _in_engine_package(module):
            yield module, ast.parse(path.read_text(), str(path))


def test_only_the_engine_packages_import_the_engines_libraries() -> None:
    found = []
    for module, tree in _outside_engine_packages():
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            found += [
                f"{module} (line {node.lineno}) imports {name}"
                for name in names
                if name.split(".")[0] in ENGINE_LIBRARIES
            ]
    assert found == [], "engine libraries imported outside the engine packages:\n" + "\n".join(
        found
    )


def _engine_names(node: ast.AST) -> list[str]:
    """The engine names a comparison operand spells out (a string, or a tuple/list/set of them)."""
    from verifier.engine.registry import ENGINE_NAMES

    values = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    return [
        v.value
        for v in values
        if isinstance(v, ast.Constant)
        and isinstance(v.value, str)
        and v.value.lower() in ENGINE_NAMES
    ]


def test_no_caller_branches_on_an_engines_name() -> None:
    """What differs between engines is a property of the engine (``verifier.engine.contract``),
    never ``if engine == "spark"`` in a caller."""
    found = []
    for module, tree in _outside_engine_packages():
        for node in ast.walk(tree):
            operands: list[ast.AST] = []
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
            elif isinstance(node, ast.MatchValue):
                operands = [node.value]
            for name in (n for operand in operands for n in _engine_names(operand)):
                found.append(f"{module} (line {getattr(node, 'lineno', '?')}) tests for {name!r}")
    assert found == [], "callers branching on an engine's name:\n" + "\n".join(found)


def test_the_engine_checks_see_what_they_look_for() -> None:
    """Not vacuous: the engine packages do import their libraries and name themselves."""
    spark_engine = ast.parse((ROOT / "verifier/engine/spark/transform.py").read_text())
    imported = {
        node.module
        for node in ast.walk(spark_engine)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert any(name.startswith("pyspark") for name in imported)
    branch = ast.parse(
        'if engine.name == "Spark":\n    pass\nmatch x:\n    case "datafusion": pass'
    )
    compare = next(n for n in ast.walk(branch) if isinstance(n, ast.Compare))
    match = next(n for n in ast.walk(branch) if isinstance(n, ast.MatchValue))
    assert _engine_names(compare.comparators[0]) == ["Spark"]
    assert _engine_names(match.value) == ["datafusion"]
