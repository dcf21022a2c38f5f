"""The internal error decoders raise while unwinding, so each level can add its field name."""

from __future__ import annotations


class Invalid(Exception):
    """Malformed input; ``path`` collects field names (or ``[i]`` indexes) from the innermost outwards."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str] = [field] if field else []

    def field_path(self) -> str:
        text = ""
        for part in reversed(self.path):
            text += part if part.startswith("[") or not text else "." + part
        return text
