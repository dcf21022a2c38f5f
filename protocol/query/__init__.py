"""The data-query protocol of an ODF node: query requests and answers, commitments and proofs,
byte-compatible with the reference's api-server (``/query``, ``/verify``).

- ``request``: ``QueryRequest`` (POST body, GET query string), ``DatasetState``, the enums.
- ``response``: ``QueryResponseWriter`` streams an answer from Arrow batches; ``output_hash``.
- ``proof``: ``Commitment``, ``Proof``, ``SubQuery``, ``ResponseSigner``, ``json_hash``.
- ``verify``: ``VerifyRequest``, ``check_commitment``, ``check_output``, ``check_answer`` (a saved
  answer on its own), ``VerifyResponse`` and
  the typed outcomes (``InputHashMismatch``, ``SubQueriesHashMismatch``, ``BadSignature``,
  ``OutputMismatch``, ``DatasetNotFound``, ``DatasetBlockNotFound``).
- ``canonical_json``, ``floats``, ``json_text``: the encodings underneath.
- ``schema``: the answer's schema in each schema format; ``render``: the data.

Pure: no I/O. Rendering is CPU-bound; callers run it off the event loop.
"""

from protocol.query.errors import (
    DataTooLargeError,
    QueryProtocolError,
    RenderError,
    RequestError,
    UnsupportedProofTypeError,
)
from protocol.query.proof import (
    Commitment,
    Proof,
    ProofType,
    ResponseSigner,
    ResponseSigningNotConfigured,
    SubQuery,
    json_hash,
)
from protocol.query.request import (
    DataFormat,
    DatasetState,
    Include,
    QueryDialect,
    QueryRequest,
    SchemaFormat,
)
from protocol.query.response import (
    QueryResponseWriter,
    SignedAnswer,
    output_hash,
    render_query_response,
    render_tail_output,
)
from protocol.query.verify import (
    BadSignature,
    DatasetBlockNotFound,
    DatasetNotFound,
    InputHashMismatch,
    OutputMismatch,
    SubQueriesHashMismatch,
    ValidationError,
    VerifyRequest,
    VerifyResponse,
    check_answer,
    check_commitment,
    check_output,
)

__all__ = [
    "BadSignature",
    "Commitment",
    "DataFormat",
    "DataTooLargeError",
    "DatasetBlockNotFound",
    "DatasetNotFound",
    "DatasetState",
    "Include",
    "InputHashMismatch",
    "OutputMismatch",
    "Proof",
    "ProofType",
    "QueryDialect",
    "QueryProtocolError",
    "QueryRequest",
    "QueryResponseWriter",
    "RenderError",
    "RequestError",
    "ResponseSigner",
    "ResponseSigningNotConfigured",
    "SchemaFormat",
    "SignedAnswer",
    "SubQueriesHashMismatch",
    "SubQuery",
    "UnsupportedProofTypeError",
    "ValidationError",
    "VerifyRequest",
    "VerifyResponse",
    "check_answer",
    "check_commitment",
    "check_output",
    "json_hash",
    "output_hash",
    "render_query_response",
    "render_tail_output",
]
