"""``${{ … }}`` templates in fetch steps (URLs, headers, paths), with the reference's grammar.

Inside the braces: one or more alternatives separated by ``||``, tried left to right; the first
that has a value is used. An alternative is ``env.NAME`` (an environment variable; letters,
digits, ``_`` and ``-``), a number (``123``, ``-1.5``) or a single-quoted string (``'text'``).
No alternative with a value, or one that is none of these, is an error naming the template.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping

from odfd.ingest.errors import IngestError

_TEMPLATE = re.compile(r"\$\{\{([^}]*)\}\}")
_ENV = re.compile(r"^env\.([a-zA-Z\-_0-9]+)$")
_NUMBER = re.compile(r"^(-?[0-9]+(?:\.[0-9]+)?)$")
_STRING = re.compile(r"^'([^']*)'$")


class TemplateError(IngestError):
    """A template names a variable that is not set (and has no default), or cannot be parsed."""


def render(text: str, field: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every ``${{ … }}`` replaced; ``field`` names where it came from in errors."""
    env = os.environ if environ is None else environ

    def substitute(match: re.Match[str]) -> str:
        expression = match.group(1).strip()
        lookups = [_alternative(part.strip(), expression, field) for part in expression.split("||")]
        for lookup in lookups:
            value = lookup(env)
            if value is not None:
                return value
        names = [part.strip()[4:] for part in expression.split("||")]
        raise TemplateError(
            f"{field}: environment variable {' or '.join(names)} is not set "
            f"(template '${{{{ {expression} }}}}')"
        )

    return _TEMPLATE.sub(substitute, text)


def _alternative(
    part: str, expression: str, field: str
) -> Callable[[Mapping[str, str]], str | None]:
    if env := _ENV.match(part):
        name = env.group(1)
        return lambda environ: environ.get(name)
    literal = _NUMBER.match(part) or _STRING.match(part)
    if literal:
        text = literal.group(1).strip()
        return lambda _: text
    raise TemplateError(
        f"{field}: '{part}' in template '${{{{ {expression} }}}}' is not env.NAME, "
        "a number or a 'quoted string'"
    )
