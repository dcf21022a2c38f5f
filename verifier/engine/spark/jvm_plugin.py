"""odfd's Spark plugin: the JVM classes the engine's determinism depends on, built on first use.

The plugin is a small jar compiled from the Java sources next to this module against the jars of
the installed PySpark (so it always matches the Spark it runs in). It is built once per source and
PySpark version into a cache folder and reused by every later process. Building needs ``javac``
from a Java 17 JDK (``JAVA_HOME`` or ``PATH``), which is the Java Spark runs on anyway.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from verifier.errors import VerifierError

#: The shuffle manager that makes reduce tasks read map outputs in a fixed order.
SHUFFLE_MANAGER = "odfd.spark.MapOrderShuffleManager"

_SOURCES = Path(__file__).with_name("jvm")


class PluginBuildError(VerifierError):
    """The Spark plugin could not be compiled (no JDK, or javac failed)."""


def plugin_jar(cache_dir: Path | None = None) -> Path:
    """The plugin jar for the installed PySpark, compiled into the cache if not already there."""
    import pyspark

    from verifier.engine.spark.internals import spark_home

    sources = sorted(_SOURCES.rglob("*.java"))
    digest = hashlib.sha256(pyspark.__version__.encode())
    for source in sources:
        digest.update(
            source.relative_to(_SOURCES).as_posix().encode() + b"\0" + source.read_bytes()
        )
    folder = cache_dir or _default_cache_dir()
    jar = folder / f"odfd-spark-{pyspark.__version__}-{digest.hexdigest()[:16]}.jar"
    if not jar.is_file():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _build(sources, spark_home() / "jars", jar)
        except OSError as err:
            raise PluginBuildError(
                f"cannot build odfd's Spark plugin in {folder} ({err.strerror or err}); "
                "point ODFD_CACHE_DIR at a writable folder"
            ) from err
    return jar


def _default_cache_dir() -> Path:
    root = os.environ.get("ODFD_CACHE_DIR") or os.environ.get("XDG_CACHE_HOME")
    return Path(root) / "odfd" if root else Path.home() / ".cache" / "odfd"


def _build(sources: list[Path], spark_jars: Path, jar: Path) -> None:
    javac = _javac()
    with tempfile.TemporaryDirectory(prefix="odfd-plugin-") as classes:
        command = [javac, "--release", "17", "-nowarn", "-cp", str(spark_jars / "*"), "-d", classes]
        result = subprocess.run(
            [*command, *map(str, sources)], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            raise PluginBuildError(
                f"compiling odfd's Spark plugin failed:\n{result.stderr.strip()}"
            )
        # Written beside the jar and renamed into place: another process building the same jar at
        # the same time writes equal content, and a reader never sees half a file.
        with tempfile.NamedTemporaryFile(
            dir=jar.parent, prefix=".building-", suffix=".jar", delete=False
        ) as tmp:
            try:
                with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
                    for path in sorted(Path(classes).rglob("*.class")):
                        archive.write(path, path.relative_to(classes).as_posix())
            except BaseException:
                os.unlink(tmp.name)
                raise
        os.replace(tmp.name, jar)


def _javac() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "javac", os.X_OK):
        return str(Path(home) / "bin" / "javac")
    found = shutil.which("javac")
    if found:
        return found
    raise PluginBuildError(
        "odfd builds a small Spark plugin on first use and needs `javac` from a Java 17 JDK "
        "(set JAVA_HOME or put javac on PATH; a JRE alone is not enough)"
    )
