"""Reading single settings and changing them in ``config.toml`` (``odfd config get|set|list``).

Keys are ``section.key`` exactly as in the file (``server.port``, ``spark.driver_memory``). A new
value is checked by the same reader that checks the file, and the whole file is re-read before it
replaces the old one, so ``config set`` can never leave a configuration the node refuses. Edits
change only the line of the key (comments and order survive).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from odfd.config import (
    ENV_PREFIX,
    ConfigError,
    NodeConfig,
    format_duration,
    is_duration,
    load_config,
    parse_list_text,
    setting_default,
    setting_keys,
)


def _split(key: str) -> tuple[str, str]:
    keys = setting_keys()
    if key not in keys:
        guess = difflib.get_close_matches(key, keys, n=1)
        hint = (
            f"did you mean {guess[0]}?"
            if guess
            else "tables such as spark.conf and sync.tokens are edited in the file"
            if key.count(".") > 1
            else "`odfd config list --with-defaults` shows every one"
        )
        raise ConfigError(f"unknown setting {key!r} ({hint})")
    section, name = key.split(".", 1)
    return section, name


def effective(config_path: Path) -> list[dict[str, Any]]:
    """Every scalar setting: its value and where it comes from (default, the file, a variable)."""
    config = load_config(config_path)
    document = _document(config_path)
    rows = []
    for key in setting_keys():
        section, name = key.split(".", 1)
        variable = f"{ENV_PREFIX}{section.upper()}_{name.upper()}"
        if variable in os.environ:
            source = f"environment {variable}"
        elif name in document.get(section, {}):
            source = "file"
        else:
            source = "default"
        rows.append({"key": key, "value": _shown(config, section, name), "source": source})
    return rows


def _shown(config: NodeConfig, section: str, name: str) -> Any:
    value = getattr(getattr(config, section), name)
    if is_duration(section, name):
        return format_duration(value)
    if isinstance(value, bytes):
        return "<set>"  # a signing key is never printed
    if isinstance(value, frozenset):
        return sorted(value)
    return value


def get(config_path: Path, key: str) -> Any:
    section, name = _split(key)
    return _shown(load_config(config_path), section, name)


def set_value(config_path: Path, key: str, text: str | None) -> None:
    """Sets ``key`` to ``text`` as one would type it in an environment variable (``None``: remove
    the key, so its default applies)."""
    section, name = _split(key)
    source = config_path.read_text(encoding="utf-8") if config_path.is_file() else ""
    literal = None if text is None else _toml_literal(section, name, text)
    updated = _edit(source, section, name, literal)
    env = {k: v for k, v in os.environ.items() if not k.startswith(ENV_PREFIX)}
    with tempfile.NamedTemporaryFile(
        "w", dir=config_path.parent, prefix=".config-", suffix=".toml", delete=False
    ) as tmp:
        tmp.write(updated)
    try:
        try:
            load_config(Path(tmp.name), env=env)
        except ConfigError as err:
            raise ConfigError(str(err).replace(tmp.name, str(config_path))) from None
        os.replace(tmp.name, config_path)
    finally:
        Path(tmp.name).unlink(missing_ok=True)


def _toml_literal(section: str, name: str, text: str) -> str:
    """The TOML form of ``text``, typed by what the setting's field holds."""
    default = setting_default(section, name)
    if isinstance(default, bool):
        lowered = text.strip().lower()
        if lowered not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
            raise ConfigError(f"{section}.{name}: expected true or false, got {text!r}")
        return "true" if lowered in ("true", "1", "yes", "on") else "false"
    if isinstance(default, int) and not is_duration(section, name):
        try:
            return str(int(text))
        except ValueError:
            raise ConfigError(f"{section}.{name}: expected an integer, got {text!r}") from None
    if isinstance(default, float) and not is_duration(section, name):
        try:
            return repr(float(text))
        except ValueError:
            raise ConfigError(f"{section}.{name}: expected a number, got {text!r}") from None
    if isinstance(default, (frozenset, list, tuple)):
        try:
            return json.dumps(parse_list_text(text))
        except ValueError as err:
            raise ConfigError(f"{section}.{name}: {err}") from None
    return json.dumps(text)


_HEADER = re.compile(r"^\s*\[([^\[\]]+)\]\s*(#.*)?$")


def _edit(source: str, section: str, name: str, literal: str | None) -> str:
    lines = source.splitlines()
    start = next(
        (
            i
            for i, line in enumerate(lines)
            if (m := _HEADER.match(line)) and m[1].strip() == section
        ),
        None,
    )
    if start is None:
        if literal is None:
            return source
        tail = "" if not source or source.endswith("\n") else "\n"
        return f"{source}{tail}\n[{section}]\n{name} = {literal}\n"
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines)
    )
    key_line = re.compile(rf"^\s*{re.escape(name)}\s*=")
    for i in range(start + 1, end):
        if key_line.match(lines[i]):
            if literal is None:
                del lines[i]
            else:
                lines[i] = f"{name} = {literal}"
            return "\n".join(lines) + "\n"
    if literal is not None:
        insert = end
        while insert > start + 1 and not lines[insert - 1].strip():
            insert -= 1
        lines.insert(insert, f"{name} = {literal}")
    return "\n".join(lines) + "\n"


def _document(config_path: Path) -> dict[str, Any]:
    if not config_path.is_file():
        return {}
    with open(config_path, "rb") as file:
        return tomllib.load(file)
