"""A query answer written as the reference's ``/query`` writes it, streamed batch by batch.

The body is ``{"input": …, "output": {"data": …, "dataFormat": …, "schema": …, "schemaFormat":
…}, "subQueries": [], "commitment": …, "proof": …}``, parts present as the request asks
(``input`` with ``Input`` or ``Proof``; ``schema`` with ``Schema`` or a schema format; the last
three with ``Proof``). JSON values inside ``output`` (data and schema) are written with sorted
keys, as the reference writes them; its structs keep their field order. ``render_tail_output``
writes the ``output`` object alone, as ``/{dataset}/tail`` answers it: the reference sends its
record writers' text there as it is, so the rows' keys keep the schema's order. When a proof is asked
for, the canonical form of the output is hashed as the data is written, so the commitment and
the signature (which come last) need no second pass over the result.

Blocking and CPU-bound: run it off the event loop and hand the chunks to the response stream.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from protocol.identity import Multicodec, Multihash
from protocol.query.canonical_json import canonical_json
from protocol.query.floats import wire_text
from protocol.query.json_text import dumps, encode
from protocol.query.proof import Commitment, Proof, ResponseSigner, ResponseSigningNotConfigured
from protocol.query.render.data import MAX_SOA_BYTES, DataWriter, Rendered
from protocol.query.render.ordered import in_order
from protocol.query.request import DatasetState, QueryRequest, SchemaFormat
from protocol.query.schema import render_schema


@dataclass(frozen=True, slots=True)
class SignedAnswer:
    """What a proof-carrying answer committed to (known once its body is written)."""

    commitment: Commitment
    proof: Proof


class QueryResponseWriter:
    """Writes one answer: iterate over ``chunks(batches)`` for the body's bytes.

    ``request`` is the request as received; ``datasets`` the datasets the query read, pinned at
    the blocks it read (the ``input.datasets`` of the answer); ``schema`` the result's Arrow
    schema. Asking for a proof of a node without ``signer`` raises
    ``ResponseSigningNotConfigured`` here, before anything is written; so does a schema that
    cannot be described (``RenderError``).
    """

    def __init__(
        self,
        request: QueryRequest,
        *,
        datasets: Sequence[DatasetState],
        schema: pa.Schema,
        signer: ResponseSigner | None = None,
        soa_limit: int = MAX_SOA_BYTES,
    ) -> None:
        self.request = request.with_implications()
        if self.request.wants_proof and signer is None:
            raise ResponseSigningNotConfigured()
        self._signer = signer
        self.echo = self.request.echo(datasets) if self.request.wants_input else None
        self._output = _OutputWriter(
            self.request, schema, wire=True, canonical=self.request.wants_proof, soa_limit=soa_limit
        )
        self.signed: SignedAnswer | None = None

    def chunks(
        self, batches: Iterable[pa.RecordBatch], workers: Executor | None = None
    ) -> Iterator[bytes | memoryview]:
        """The body's bytes. Nothing is yielded before the first rows are rendered (all of
        JsonSoA's only at the end), so an error rendering the data can still be answered with
        an error status. With ``workers``, successive chunks of rows are rendered there at
        once (``render.ordered``), the bytes the same."""
        head = b"{"
        if self.echo is not None:
            head += b'"input":' + dumps(self.echo.to_json()).encode() + b","
        pending: list[bytes | memoryview] = [head + b'"output":', *self._output.start()]
        for pieces in self._output.pieces(batches, workers):
            if pieces:
                yield from pending
                pending = []
                yield from pieces
        yield from pending
        yield from self._output.finish()
        if not self.request.wants_proof:
            yield b"}"
            return
        assert self._signer is not None and self.echo is not None
        commitment = Commitment.of(self.echo.to_json(), self._output.canonical_hash(), [])
        proof = self._signer.sign(commitment)
        self.signed = SignedAnswer(commitment, proof)
        tail = {"subQueries": [], "commitment": commitment.to_json(), "proof": proof.to_json()}
        yield b"," + dumps(tail)[1:].encode()


def render_query_response(
    request: QueryRequest,
    *,
    datasets: Sequence[DatasetState],
    schema: pa.Schema,
    batches: Iterable[pa.RecordBatch],
    signer: ResponseSigner | None = None,
) -> bytes:
    """The whole body at once (for small answers and tests)."""
    writer = QueryResponseWriter(request, datasets=datasets, schema=schema, signer=signer)
    return b"".join(bytes(chunk) for chunk in writer.chunks(batches))


def render_tail_output(
    request: QueryRequest, *, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
) -> bytes:
    """The ``output`` object alone, rows' keys in schema order (``/{dataset}/tail``)."""
    writer = _OutputWriter(request, schema, wire=True, canonical=False, schema_order=True)
    pieces = [*writer.start()]
    for chunk in writer.pieces(batches, None):
        pieces += chunk
    pieces += writer.finish()
    return b"".join(bytes(piece) for piece in pieces)


def output_hash(
    request: QueryRequest, *, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
) -> Multihash:
    """The hash of the output a request produces (the request as ``/verify`` re-executes it,
    ``QueryRequest.to_reproduce``); nothing else is rendered."""
    writer = _OutputWriter(request.with_implications(), schema, wire=False, canonical=True)
    writer.start()
    for _ in writer.pieces(batches, None):
        pass
    writer.finish()
    return writer.canonical_hash()


class _OutputWriter:
    """The ``output`` object: yields its wire bytes and hashes its canonical bytes."""

    def __init__(
        self,
        request: QueryRequest,
        schema: pa.Schema,
        *,
        wire: bool,
        canonical: bool,
        soa_limit: int = MAX_SOA_BYTES,
        schema_order: bool = False,
    ) -> None:
        self._wire = wire
        self._canonical = canonical
        self._data = DataWriter(
            request.data_format,
            wire=wire,
            canonical=canonical,
            soa_limit=soa_limit,
            schema_order=schema_order,
        )
        self._format = request.data_format.value
        schema_format = request.answer_schema_format
        self._schema: tuple[Any, SchemaFormat] | None = None
        if schema_format is not None:
            self._schema = (render_schema(schema, schema_format), schema_format)
        self._hasher = hashlib.sha3_256() if canonical else None

    def start(self) -> list[bytes | memoryview]:
        return self._emit(Rendered([b'{"data":'], [b'{"data":']))

    def pieces(
        self, batches: Iterable[pa.RecordBatch], workers: Executor | None
    ) -> Iterator[list[bytes | memoryview]]:
        """The wire pieces of each chunk of the rows, in order; with ``workers``, chunks are
        rendered there, several at once."""
        chunks = (chunk for batch in batches for chunk in self._data.split(batch))
        for rendered in in_order(self._data.render, chunks, workers):
            yield self._emit(self._data.place(rendered))

    def finish(self) -> list[bytes | memoryview]:
        out = self._data.finish()
        suffix = f',"dataFormat":"{self._format}"'
        wire_tail = canonical_tail = suffix
        if self._schema is not None:
            value, schema_format = self._schema
            wire_schema = encode(value, float_text=wire_text, sort_keys=True, ascii_only=False)
            canonical_schema = canonical_json(value).decode()
            wire_tail += f',"schema":{wire_schema},"schemaFormat":"{schema_format.value}"'
            canonical_tail += f',"schema":{canonical_schema},"schemaFormat":"{schema_format.value}"'
        out.wire.append((wire_tail + "}").encode())
        out.canonical.append((canonical_tail + "}").encode())
        return self._emit(out)

    def canonical_hash(self) -> Multihash:
        assert self._hasher is not None
        return Multihash(Multicodec.SHA3_256, self._hasher.digest())

    def _emit(self, rendered: Rendered) -> list[bytes | memoryview]:
        """Hash the canonical pieces now; hand back the wire pieces."""
        if self._hasher is not None:
            for piece in rendered.canonical:
                self._hasher.update(piece)
        return rendered.wire if self._wire else []
