"""A ``Source`` resource's spec read into the model (``SourceSpecInput``), minus ``config``, whose
values are references read by :mod:`odfd.sources.values` from the resolved reference rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from odfd.errors import OdfdError
from protocol.codec.tree import from_tree
from protocol.errors import DecodeError
from protocol.model import IngressBufferMemory, IngressRestEndpoint, SourceSpecInput
from storage.catalog.resources import ResourceRecord

DEFAULT_BUFFER_SIZE = 10_000
"""Records a ``RestEndpoint``'s memory buffer holds when its manifest gives no ``bufferSize``."""


class SourceSpecError(OdfdError):
    """A Source this node cannot run; ``code`` names the condition."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class BufferPolicy:
    """How a ``RestEndpoint`` holds pushed records until an ``Ingest`` task flushes them."""

    capacity: int
    drop_oldest: bool
    """``overflowPolicy: DropOldest``; otherwise (``Reject``) a post that does not fit is refused."""


@dataclass(frozen=True, slots=True)
class SourceDefinition:
    id: str
    name: str
    generation: int
    spec: SourceSpecInput
    config_keys: tuple[str, ...]

    @classmethod
    def from_record(cls, record: ResourceRecord) -> SourceDefinition:
        tree: dict[str, Any] = {k: v for k, v in record.spec.items() if k != "config"}
        try:
            spec = from_tree(tree, "SourceSpecInput", f"Source {record.name}", "spec")
        except DecodeError as err:
            raise SourceSpecError("invalid-spec", str(err)) from None
        config = record.spec.get("config") or {}
        if spec.ingress is None:
            raise SourceSpecError(
                "no-ingress",
                f"Source {record.name}: spec.ingress is missing: nothing says where data comes from",
            )
        return cls(record.id, record.name, record.generation, spec, tuple(config))

    @property
    def pushed(self) -> bool:
        """Whether data is pushed to it (``RestEndpoint``) rather than fetched by polling."""
        return isinstance(self.spec.ingress, IngressRestEndpoint)

    def buffer(self) -> BufferPolicy:
        ingress = self.spec.ingress
        buffer = ingress.buffer if isinstance(ingress, IngressRestEndpoint) else None
        memory = buffer if isinstance(buffer, IngressBufferMemory) else IngressBufferMemory()
        capacity = memory.buffer_size if memory.buffer_size is not None else DEFAULT_BUFFER_SIZE
        return BufferPolicy(capacity, memory.overflow_policy == "DropOldest")
