"""``${{ … }}`` templates in fetch steps (URLs, headers, paths), with the reference's grammar.

Inside the braces: one or more alternatives separated by ``||``, tried left to right; the first
that has a value is used. An alternative is ``env.NAME`` (an environment variable; letters,
digits, ``_`` and ``-``), ``config.NAME`` (a value an RFC-018 ``Source`` brings in with its
``config``, when rendering for one), a number (``123``, ``-1.5``) or a single-quoted string
(``'text'``). No alternative with a value, or one that is none of these, is an error naming the
template (never a value).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping

from odfd.ingest.errors import IngestError

_TEMPLATE = re.compile(r"\$\{\{([^}]*)\}\}")
_ENV = re.compile(r"^env\.([a-zA-Z\-_0-9]+)$")
_CONFIG = re.compile(r"^config\.([a-zA-Z\-_0-9]+)$")
_NUMBER = re.compile(r"^(-?[0-9]+(?:\.[0-9]+)?)$")
_STRING = re.compile(r"^'([^']*)'$")


class TemplateError(IngestError):
    """A template names a variable that is not set (and has no default), or cannot be parsed."""


def render(
    text: str,
    field: str,
    environ: Mapping[str, str] | None = None,
    config: Mapping[str, str] | None = None,
) -> str:
    """``text`` with every ``${{ … }}`` replaced; ``field`` names where it came from in errors.
    ``config``: the values ``config.NAME`` reads (None: ``config.`` is not allowed here)."""
    env = os.environ if environ is None else environ

    def substitute(match: re.Match[str]) -> str:
        expression = match.group(1).strip()
        parts = [part.strip() for part in expression.split("||")]
        lookups = [_alternative(part, expression, field, env, config) for part in parts]
        for lookup in lookups:
            value = lookup()
            if value is not None:
                return value
        raise TemplateError(
            f"{field}: {_unset(parts)} is not set (template '${{{{ {expression} }}}}')"
        )

    return _TEMPLATE.sub(substitute, text)


def _unset(parts: list[str]) -> str:
    """``environment variable A or B``, ``config value A``, or each named when they mix."""
    env = [p[4:] for p in parts if p.startswith("env.")]
    config = [p[7:] for p in parts if p.startswith("config.")]
    if not config:
        return f"environment variable {' or '.join(env)}"
    if not env:
        return f"config value {' or '.join(config)}"
    return " or ".join(
        [f"environment variable {n}" for n in env] + [f"config value {n}" for n in config]
    )


def _alternative(
    part: str,
    expression: str,
    field: str,
    environ: Mapping[str, str],
    config: Mapping[str, str] | None,
) -> Callable[[], str | None]:
    if env := _ENV.match(part):
        name = env.group(1)
        return lambda: environ.get(name)
    if config is not None and (found := _CONFIG.match(part)):
        key = found.group(1)
        return lambda: config.get(key)
    literal = _NUMBER.match(part) or _STRING.match(part)
    if literal:
        text = literal.group(1).strip()
        return lambda: text
    allowed = "env.NAME, config.NAME" if config is not None else "env.NAME"
    raise TemplateError(
        f"{field}: '{part}' in template '${{{{ {expression} }}}}' is not {allowed}, "
        "a number or a 'quoted string'"
    )
