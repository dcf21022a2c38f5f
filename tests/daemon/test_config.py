"""The node's one typed configuration: defaults documented in ``config.example.toml``,
environment overrides, and errors that name the key and where it came from."""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from odfd.config import (
    _SECTIONS,
    ConfigError,
    NodeConfig,
    format_duration,
    load_config,
    parse_duration,
)
from odfd.sync.transport.settings import TransportSettings

EXAMPLE = Path(__file__).resolve().parents[2] / "config.example.toml"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_example_documents_every_key_with_its_default() -> None:
    document = tomllib.loads(EXAMPLE.read_text())
    text = EXAMPLE.read_text()
    for section, (_, readers) in _SECTIONS.items():
        for key in readers:
            assert f"{key} =" in text, f"config.example.toml does not document [{section}] {key}"
    example, defaults = load_config(EXAMPLE, env={}), NodeConfig()
    assert replace(example.server, url_signing_key=b"") == replace(
        defaults.server, url_signing_key=b""
    )
    assert (
        example.spark,
        example.ipfs,
        example.s3,
        example.sync,
        example.audit,
        example.daemon,
        example.log,
        example.metrics,
    ) == (
        defaults.spark,
        defaults.ipfs,
        defaults.s3,
        defaults.sync,
        defaults.audit,
        defaults.daemon,
        defaults.log,
        defaults.metrics,
    )
    assert set(document) <= {*_SECTIONS, "workspace", "spark"}


def test_file_values_and_environment_overrides(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
[server]
port = 9000
push_tokens = ["t1"]
[sync]
default_interval = "90s"
max_concurrent = 2
[sync.tokens]
"http://b.example/" = "tb"
"http://b.example/private/" = "tp"
[spark]
master = "local[1]"
""",
    )
    config = load_config(
        path,
        env={
            "ODFD_SERVER_PORT": "9100",
            "ODFD_SYNC_MAX_CONCURRENT": "7",
            "ODFD_LOG_FORMAT": "JSON",
            "ODFD_AUDIT_WITHHOLD_FAILING": "yes",
            "ODFD_SERVER_PUSH_TOKENS": "a, b",
            "ODFD_SPARK_DRIVER_MEMORY": "2g",
            "ODFD_IPFS_API": "/ip4/127.0.0.1/tcp/5999/http",
        },
    )
    assert config.server.port == 9100 and config.server.push_tokens == frozenset({"a", "b"})
    assert config.sync.default_interval == 90 and config.sync.max_concurrent == 7
    assert config.log.format == "json" and config.audit.withhold_failing is True
    assert config.spark.master == "local[1]" and config.spark.driver_memory == "2g"
    assert config.ipfs.settings().api == "/ip4/127.0.0.1/tcp/5999/http"
    transports = TransportSettings.from_config(config)
    assert transports.token_for("http://b.example/private/x") == "tp"
    assert transports.token_for("http://b.example/public") == "tb"
    assert transports.token_for("http://c.example/") is None


@pytest.mark.parametrize(
    ("text", "env", "message"),
    [
        (
            "[server]\nport = 70000\n",
            {},
            r"config.toml: \[server\] port: must be between 0 and 65535",
        ),
        ("[server]\nprot = 1\n", {}, r"config.toml: \[server\] unknown key\(s\) prot"),
        (
            '[sync]\ndefault_interval = "soon"\n',
            {},
            r"\[sync\] default_interval: 'soon' is not a duration",
        ),
        (
            '[sync]\nbackoff_initial = "2h"\n',
            {},
            r"backoff_initial \(2h\) is longer than backoff_max \(1h\)",
        ),
        ('[log]\nformat = "xml"\n', {}, r"\[log\] format: must be one of text, json"),
        ("[daemons]\n", {}, r"unknown section\(s\) \[daemons\]"),
        ("[spark]\nmaster = 3\n", {}, r"config.toml: config \[spark\].master"),
        (
            "",
            {"ODFD_SYNC_MAX_CONCURRENT": "many"},
            r"environment variable ODFD_SYNC_MAX_CONCURRENT: expected an integer",
        ),
        (
            "",
            {"ODFD_METRICS_ENABLED": "perhaps"},
            r"environment variable ODFD_METRICS_ENABLED: expected true or false",
        ),
        ("[server\n", {}, r"config.toml: invalid TOML"),
    ],
)
def test_bad_configuration_names_the_key_and_the_source(
    tmp_path: Path, text: str, env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_write(tmp_path, text), env=env)


def test_durations() -> None:
    assert (
        parse_duration("1h30m") == 5400
        and parse_duration("250ms") == 0.25
        and parse_duration(42) == 42
    )
    for text in ("", "5 minutes", "-1s", "1h-"):
        with pytest.raises(ValueError):
            parse_duration(text)
    for seconds in (1, 59, 60, 3600, 5400, 86400 + 61, 0.5):
        assert parse_duration(format_duration(seconds)) == seconds
