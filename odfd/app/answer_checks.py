"""Signed answers outside the HTTP API: a query answered with its proof (``odfd sql -o json
--proof``, the console's SQL box) and a saved answer checked (``odfd sql --verify``).

A saved answer is checked in two steps, so that whoever reads the result knows which one failed:
first on its own, as any client can (the input's and sub-queries' hashes, the ed25519 signature,
the hash of the output it carries: ``protocol.query.check_answer``); then its output is
re-executed at the blocks it pins, either on this node over its own datasets
(``odfd.app.answers.verify``) or by asking another node's ``/verify``. A saved verify request
(the answer without its output, what ``/verify`` takes) is checked the same way, less the hash
of an output it does not carry.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from odfd.app.answers import QueryLimits, Visible, execute, limits_of, node_signer, verify
from odfd.errors import OdfdError
from protocol.query import (
    Include,
    QueryDialect,
    QueryProtocolError,
    QueryRequest,
    ResponseSigningNotConfigured,
    VerifyRequest,
    check_answer,
    check_commitment,
)
from protocol.query.json_text import loads

if TYPE_CHECKING:
    from odfd.app.node import Node

_REMOTE_TIMEOUT_SECONDS = 30.0
"""To connect to the remote node; its answer may take as long as its query time limit."""

LOCAL = "this node"
"""Where a check re-executed the query when it asked no other node."""


class AnswerCheckError(OdfdError):
    """The answer could not be checked at all (unreadable, not an answer with a proof, or the
    node asked could not be reached or answered no verdict): no verdict either way."""

    exit_code = 2


@dataclass(frozen=True, slots=True)
class ProvenAnswer:
    """A query's rows and its whole signed answer (the body ``/query`` would send)."""

    table: pa.Table
    body: bytes

    @property
    def document(self) -> dict[str, Any]:
        value = json.loads(self.body)
        assert isinstance(value, dict)
        return value


DIALECT_OF_ENGINE = {"datafusion": QueryDialect.SQL_DATAFUSION, "spark": QueryDialect.SQL_SPARK}
"""The query dialect of each engine ``odfd sql --engine`` names."""


async def answer_with_proof(
    node: Node,
    sql: str,
    *,
    engine: str = "datafusion",
    limit: int | None = None,
    visible: Visible | None = None,
) -> ProvenAnswer:
    """Runs ``sql`` in ``engine``'s dialect over the datasets it names at their heads and signs
    the answer with the node's key, as ``/query`` with ``include=Proof`` does (at most ``limit`` rows; default: the
    node's ``[server] query_max_rows``). Raises ``ResponseSigningNotConfigured`` on a node
    without a key, before running anything, and ``odfd.app.answers``' ``AnswerError``s."""
    signer = node_signer(node)
    if signer is None:
        raise ResponseSigningNotConfigured()
    limits = limits_of(node.config.server)
    request = QueryRequest(
        query=sql,
        query_dialect=DIALECT_OF_ENGINE[engine.lower()],
        include=frozenset({Include.PROOF}),
        limit=limits.max_rows if limit is None else limit,
    )
    result = await execute(node, request, visible=visible, limits=limits)
    body = await asyncio.to_thread(result.render, signer)
    return ProvenAnswer(pa.Table.from_batches(result.batches, result.schema), body)


@dataclass(frozen=True, slots=True)
class CheckFailure:
    """Which check failed: the reference's error kind and message, and its details."""

    kind: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        """One line for a person: kind, message, then the details (hashes, dataset, block)."""
        extra = ", ".join(f"{key} {value}" for key, value in self.details.items())
        return f"{self.kind}: {self.message}" + (f" ({extra})" if extra else "")


@dataclass(frozen=True, slots=True)
class AnswerCheck:
    """The verdict on a saved answer."""

    signer: str
    """The ``did:key`` that signed it."""
    re_executed_by: str | None
    """Where its query ran again (``LOCAL`` or a node's URL); ``None`` when the answer failed
    on its own and nothing was re-executed."""
    failure: CheckFailure | None = None

    @property
    def ok(self) -> bool:
        return self.failure is None


def read_answer(text: bytes | str, source: str) -> tuple[dict[str, Any], VerifyRequest]:
    """A saved answer (a ``/query`` body with a proof) and the verify request it makes; or a
    saved verify request (an answer without its ``output``) and itself."""
    try:
        answer = loads(text)
        if isinstance(answer, dict) and "output" not in answer:
            request = VerifyRequest.from_json(answer)
        else:
            request = VerifyRequest.from_answer(answer)
    except QueryProtocolError as error:
        raise AnswerCheckError(f"{source}: not an answer with a proof: {error}") from None
    return answer, request


async def check_locally(
    node: Node, text: bytes | str, source: str, *, limits: QueryLimits | None = None
) -> AnswerCheck:
    """Checks the answer in ``text`` on its own, then re-executes its query on this node."""
    answer, request = read_answer(text, source)
    signer = str(request.proof.verification_method)
    failed = _on_its_own(answer, request, source)
    if failed is not None:
        return AnswerCheck(signer, None, failed)
    try:
        response = await verify(node, request, limits=limits or limits_of(node.config.server))
    except QueryProtocolError as error:
        raise AnswerCheckError(f"{source}: {error}") from None
    if response.error is None:
        return AnswerCheck(signer, LOCAL)
    return AnswerCheck(signer, LOCAL, _failure(response.error.to_json()))


async def check_remotely(
    text: bytes | str, source: str, url: str, *, token: str | None = None
) -> AnswerCheck:
    """Checks the answer in ``text`` on its own, then asks the node at ``url`` (its
    ``/verify``) to re-execute it."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=None, sock_connect=_REMOTE_TIMEOUT_SECONDS)
    answer, request = read_answer(text, source)
    signer = str(request.proof.verification_method)
    failed = _on_its_own(answer, request, source)
    if failed is not None:
        return AnswerCheck(signer, None, failed)
    endpoint = url.rstrip("/") + "/verify"
    body = {key: value for key, value in answer.items() if key != "output"}
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as http,
            http.post(endpoint, json=body, headers=headers) as reply,
        ):
            status, text_reply = reply.status, await reply.text()
    except aiohttp.ClientConnectorError as error:
        from odfd.sync.transport.http_errors import cannot_reach

        raise AnswerCheckError(cannot_reach(url, error)) from None
    except aiohttp.ClientError as error:
        raise AnswerCheckError(f"cannot ask {endpoint}: {error}") from None
    try:
        verdict = json.loads(text_reply)
    except json.JSONDecodeError:
        verdict = None
    if status == 200 and isinstance(verdict, dict) and verdict.get("ok") is True:
        return AnswerCheck(signer, url)
    if status == 400 and isinstance(verdict, dict) and isinstance(verdict.get("error"), dict):
        return AnswerCheck(signer, url, _failure(verdict["error"]))
    message = verdict.get("message") if isinstance(verdict, dict) else None
    raise AnswerCheckError(
        f"{endpoint} answered {status} without a verdict: {message or text_reply[:200]!r}"
    )


def _on_its_own(answer: dict[str, Any], request: VerifyRequest, source: str) -> CheckFailure | None:
    """The checks that need no data: those of ``check_answer``, or of ``check_commitment`` for a
    verify request, which carries no output to hash."""
    try:
        if "output" in answer:
            error = check_answer(answer)
        else:
            error = check_commitment(request)
    except QueryProtocolError as problem:
        raise AnswerCheckError(f"{source}: {problem}") from None
    return None if error is None else _failure(error.to_json())


def _failure(error: dict[str, Any]) -> CheckFailure:
    details = {k: v for k, v in error.items() if k not in ("kind", "message")}
    return CheckFailure(str(error.get("kind", "?")), str(error.get("message", "")), details)
