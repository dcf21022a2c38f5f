"""odfd's Spark plugin jar: built from source against the installed PySpark, once, or a clear error."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from verifier.engine.spark.jvm_plugin import SHUFFLE_MANAGER, PluginBuildError, plugin_jar


def test_the_jar_is_built_once_and_holds_the_shuffle_manager(tmp_path: Path) -> None:
    jar = plugin_jar(tmp_path)
    names = zipfile.ZipFile(jar).namelist()
    assert SHUFFLE_MANAGER.replace(".", "/") + ".class" in names
    built = jar.stat().st_mtime_ns
    assert plugin_jar(tmp_path) == jar and jar.stat().st_mtime_ns == built
    assert [p.name for p in tmp_path.iterdir()] == [jar.name]  # no leftovers of the build


def test_without_a_jdk_the_error_says_javac_is_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PluginBuildError, match="javac"):
        plugin_jar(tmp_path / "cache")
    assert not list((tmp_path / "cache").glob("*.jar"))
