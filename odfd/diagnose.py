"""``odfd system diagnose``: checks of what odfd needs, each with what is wrong and the fix.

Cheap and read-only: nothing starts Spark or changes the workspace. Each check returns a
:class:`Check`; the command prints them and exits 1 if any failed.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from odfd.config import ConfigError, NodeConfig, load_config, unknown_environment
from odfd.coordinator import leftovers
from protocol.errors import ParseError
from storage.ipfs_client import IpfsClient, IpfsError, IpfsUnavailableError
from storage.workspace import Workspace

MIN_FREE_BYTES = 1 << 30
GC_GRACE = 3600.0


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None
    required: bool = True
    """Optional parts (IPFS, only for ipfs:// and ipns://) do not fail the diagnosis."""


async def run_checks(workspace: Workspace) -> list[Check]:
    checks = [_config(workspace), _environment(), await asyncio.to_thread(_java), _spark()]
    config = _loaded(workspace)
    checks += [
        await _catalog(workspace),
        await _folders(workspace),
        _disk(workspace),
        await _leftovers(workspace),
    ]
    if config is not None:
        checks.append(await _ipfs(config))
    return checks


def _loaded(workspace: Workspace) -> NodeConfig | None:
    try:
        return load_config(workspace.layout.config_path)
    except ConfigError:
        return None


def _config(workspace: Workspace) -> Check:
    try:
        load_config(workspace.layout.config_path)
    except ConfigError as err:
        return Check("config", False, str(err), "fix or remove the named setting")
    return Check("config", True, str(workspace.layout.config_path))


def _environment() -> Check:
    unknown = unknown_environment()
    if unknown:
        names = ", ".join(name + (f" (did you mean {g}?)" if g else "") for name, g in unknown)
        return Check("environment", False, f"unknown variable(s): {names}", "rename or unset them")
    return Check("environment", True, "no unknown ODFD_* variables")


def java_version() -> tuple[str, int] | None:
    """``(java path, major version)``, or ``None`` without a runnable ``java``."""
    from verifier.engine.spark.session import java_path

    java = java_path()
    if java is None:
        return None
    try:
        result = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr)
    if match is None:
        return java, 0
    major = int(match[1])
    return java, int(match[2] or 0) if major == 1 else major


def _java() -> Check:
    found = java_version()
    if found is None:
        return Check("java", False, "no java on PATH or in JAVA_HOME", "install a Java 17 JDK")
    java, major = found
    if major != 17:
        return Check(
            "java",
            False,
            f"{java} is Java {major}",
            "Spark 4 runs on Java 17: set JAVA_HOME to one",
        )
    # odfd compiles its small Spark plugin with the JDK's javac on first use
    ok = (Path(java).resolve().parent / "javac").exists() or shutil.which("javac") is not None
    return Check(
        "java", ok, f"{java} (Java 17)", None if ok else "install the JDK, not only the JRE"
    )


def _spark() -> Check:
    try:
        version = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        return Check("spark", False, "pyspark is not installed", "run scripts/setup")
    return Check("spark", True, f"pyspark {version} (not started by this check)")


async def _catalog(workspace: Workspace) -> Check:
    async with workspace.catalog.transaction() as db:
        cursor = await db.execute("PRAGMA quick_check")
        rows = await cursor.fetchall()
    result = ", ".join(str(row[0]) for row in rows)
    if result != "ok":
        return Check("catalog", False, result, "run `odfd repair` to rebuild it")
    return Check("catalog", True, str(workspace.layout.catalog_path))


async def _folders(workspace: Workspace) -> Check:
    missing = []
    for record in await workspace.list_datasets():
        if record.head is not None and not await workspace.open_dataset(record.id).chain.head():
            missing.append(record.alias)
    if missing:
        return Check(
            "datasets",
            False,
            f"folder or head missing for {', '.join(missing)}",
            "restore the folders, or run `odfd repair` to drop them from the catalog",
        )
    return Check(
        "datasets", True, f"{len(await workspace.list_datasets())} dataset(s), all present"
    )


def _disk(workspace: Workspace) -> Check:
    usage = shutil.disk_usage(workspace.root)
    free = f"{usage.free / (1 << 30):.1f} GiB free of {usage.total / (1 << 30):.1f} GiB"
    if usage.free < MIN_FREE_BYTES:
        return Check("disk", False, free, "free space (`odfd system gc` removes leftovers)")
    return Check("disk", True, free)


async def _leftovers(workspace: Workspace) -> Check:
    found = (
        await leftovers.run_scratch(workspace, GC_GRACE)
        + await leftovers.unreferenced_objects(workspace, GC_GRACE)
        + await leftovers.staging_files(workspace, GC_GRACE)
    )
    if found:
        size = sum(item.size for item in found)
        return Check(
            "leftovers",
            False,
            f"{len(found)} leftover file(s)/folder(s), {size} bytes",
            "run `odfd system gc`",
        )
    return Check("leftovers", True, "none older than an hour")


async def _ipfs(config: NodeConfig) -> Check:
    try:
        info = await IpfsClient(config.ipfs.api, timeout=5).id()
    except (IpfsError, ParseError) as err:
        reason = "not reachable" if isinstance(err, IpfsUnavailableError) else str(err)
        return Check(
            "ipfs",
            False,
            f"no IPFS node at {config.ipfs.api}: {reason}",
            "start one (scripts/ipfs) or set [ipfs] api",
            required=False,
        )
    return Check("ipfs", True, f"{config.ipfs.api} (peer {info.peer_id})")
