"""Chain states saved outside the chain, so a new process need not re-validate a whole chain.

Everything a ``ChainState`` holds comes from a handful of blocks: the head, the ``Seed``, the last
``AddData``/``ExecuteTransform``, the last ``SetDataSchema`` and ``SetVocab``, the active polling
and push sources and the last ``SetTransform`` (``ChainState`` tracks their hashes). A
``SavedState`` is those hashes plus the head's sequence number; ``restore`` reads the blocks back
(each re-hashed against its name) and rebuilds the state from their events, in a few block reads
instead of one per block of the chain.

Saved states live in the workspace's catalog (``storage.catalog.chain_states``), an index that is
never the source of truth: whatever is wrong with one (missing, unreadable, for another head or
another dataset, naming blocks that are gone or that do not play the part it says) makes
``MetadataChain.state`` ignore it and compute the state from the chain instead.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from protocol.errors import ParseError
from protocol.identity import DatasetId, Multihash
from protocol.model import (
    AddData,
    AddPushSource,
    DatasetKind,
    DisablePollingSource,
    DisablePushSource,
    ExecuteTransform,
    MetadataBlock,
    Seed,
    SetDataSchema,
    SetPollingSource,
    SetTransform,
    SetVocab,
)
from storage.chain.rules import ChainState, declared_input_ids
from storage.errors import StorageError

SAVED_STATE_VERSION = 1

ReadBlock = Callable[[Multihash], Awaitable[MetadataBlock]]


class SavedStateError(StorageError):
    """A saved state cannot be read or does not describe the chain it is restored against."""


class SavedStateStore(ABC):
    """Where saved states are kept, one per dataset (the latest written wins)."""

    @abstractmethod
    async def load(self, dataset_id: DatasetId) -> bytes | None:
        """The bytes last saved for ``dataset_id``, if any."""

    @abstractmethod
    async def save(self, dataset_id: DatasetId, head: Multihash, data: bytes) -> None:
        """Replace what is saved for ``dataset_id`` with ``data``, the state at ``head``."""

    @abstractmethod
    async def delete(self, dataset_id: DatasetId) -> None:
        """Forget ``dataset_id``'s saved state (nothing happens if there is none)."""


@dataclass(frozen=True, slots=True)
class SavedState:
    """The state of dataset ``dataset_id`` at ``head``, as the blocks it is made of."""

    dataset_id: DatasetId
    head: Multihash
    sequence_number: int
    seed: Multihash
    last_data: Multihash | None
    schema: Multihash | None
    vocab: Multihash | None
    polling_source: Multihash | None
    push_sources: tuple[Multihash, ...]
    """In the order of ``ChainState.push_sources``."""
    transform: Multihash | None

    @classmethod
    def of(cls, state: ChainState) -> SavedState:
        """What to save for ``state`` (which must be past its ``Seed``)."""
        if state.head is None or state.dataset_id is None or state.seed_block is None:
            raise SavedStateError("only the state of a chain with a Seed can be saved")
        return cls(
            dataset_id=state.dataset_id,
            head=state.head,
            sequence_number=state.sequence_number,
            seed=state.seed_block,
            last_data=state.last_data_block,
            schema=state.schema_block,
            vocab=state.vocab_block,
            polling_source=state.polling_source_block,
            push_sources=tuple(state.push_source_blocks.values()),
            transform=state.transform_block,
        )

    # --- bytes ----------------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        document = {
            "version": SAVED_STATE_VERSION,
            "datasetId": str(self.dataset_id),
            "head": str(self.head),
            "sequenceNumber": self.sequence_number,
            "seed": str(self.seed),
            "lastData": _text(self.last_data),
            "schema": _text(self.schema),
            "vocab": _text(self.vocab),
            "pollingSource": _text(self.polling_source),
            "pushSources": [str(h) for h in self.push_sources],
            "transform": _text(self.transform),
        }
        return json.dumps(document, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> SavedState:
        """Parse ``to_bytes`` output; ``SavedStateError`` for anything else."""
        try:
            document = json.loads(data)
            if not isinstance(document, dict) or document.get("version") != SAVED_STATE_VERSION:
                raise SavedStateError(f"saved chain state is not version {SAVED_STATE_VERSION}")
            sequence_number = document["sequenceNumber"]
            if type(sequence_number) is not int or sequence_number < 0:
                raise SavedStateError(f"saved chain state has sequenceNumber {sequence_number!r}")
            push_sources = document["pushSources"]
            if not isinstance(push_sources, list):
                raise SavedStateError("saved chain state: pushSources is not a list")
            return cls(
                dataset_id=DatasetId.parse(document["datasetId"]),
                head=_hash(document["head"]),
                sequence_number=sequence_number,
                seed=_hash(document["seed"]),
                last_data=_optional_hash(document["lastData"]),
                schema=_optional_hash(document["schema"]),
                vocab=_optional_hash(document["vocab"]),
                polling_source=_optional_hash(document["pollingSource"]),
                push_sources=tuple(_hash(h) for h in push_sources),
                transform=_optional_hash(document["transform"]),
            )
        except (ValueError, KeyError, TypeError, ParseError) as err:  # JSON, fields, multibase
            raise SavedStateError(f"saved chain state is unreadable: {err}") from None

    # --- restoring ------------------------------------------------------------------------------

    async def restore(self, read_block: ReadBlock) -> ChainState:
        """Rebuild the state by reading the blocks named (``read_block`` must re-hash them).

        Raises ``SavedStateError`` if a block does not play the part the saved state gives it, and
        whatever ``read_block`` raises for a missing or corrupt block.
        """
        head = await read_block(self.head)
        if head.sequence_number != self.sequence_number:
            raise self._error(
                f"head {self.head} is block #{head.sequence_number}, "
                f"saved as #{self.sequence_number}"
            )
        seed = await self._event(read_block, self.seed, Seed, "seed")
        if seed.dataset_id != self.dataset_id:
            raise self._error(f"seed {self.seed} is of dataset {seed.dataset_id}")
        kind = seed.dataset_kind
        state = ChainState(self.dataset_id)
        state.head = self.head
        state.sequence_number = head.sequence_number
        state.system_time = head.system_time
        state.kind = kind
        state.seed_block = self.seed

        if self.last_data is not None:
            data = await self._event(
                read_block, self.last_data, (AddData, ExecuteTransform), "last data event"
            )
            new_data = data.new_data
            state.last_offset = (
                data.prev_offset if new_data is None else new_data.offset_interval.end
            )
            state.last_checkpoint = (
                None if data.new_checkpoint is None else data.new_checkpoint.physical_hash
            )
            state.last_watermark = data.new_watermark
            if isinstance(data, AddData):
                self._require_kind(kind, DatasetKind.ROOT, "AddData")
                state.last_source_state = data.new_source_state
            else:
                self._require_kind(kind, DatasetKind.DERIVATIVE, "ExecuteTransform")
                state.transform_inputs = {i.dataset_id: i for i in data.query_inputs}
            state.last_data_block = self.last_data
        if self.schema is not None:
            state.schema = await self._event(read_block, self.schema, SetDataSchema, "schema")
            state.schema_block = self.schema
        if self.vocab is not None:
            state.vocab = await self._event(read_block, self.vocab, SetVocab, "vocab")
            state.vocab_block = self.vocab
        if self.polling_source is not None:
            self._require_kind(kind, DatasetKind.ROOT, "SetPollingSource")
            state.polling_source = await self._event(
                read_block, self.polling_source, SetPollingSource, "polling source"
            )
            state.polling_source_block = self.polling_source
        if self.push_sources:
            self._require_kind(kind, DatasetKind.ROOT, "AddPushSource")
            if self.polling_source is not None:
                raise self._error("it names both a polling source and push sources")
            for hash in self.push_sources:
                source = await self._event(read_block, hash, AddPushSource, "push source")
                if source.source_name in state.push_sources:
                    raise self._error(f"it names two push sources called '{source.source_name}'")
                state.push_sources = {**state.push_sources, source.source_name: source}
                state.push_source_blocks = {**state.push_source_blocks, source.source_name: hash}
        if self.transform is not None:
            self._require_kind(kind, DatasetKind.DERIVATIVE, "SetTransform")
            transform = await self._event(read_block, self.transform, SetTransform, "transform")
            input_ids = declared_input_ids(transform)
            if None in input_ids:
                raise self._error(
                    f"transform {self.transform} has an input that is not a dataset id"
                )
            state.transform = transform
            state.transform_input_ids = input_ids  # type: ignore[assignment]  # no None, checked
            state.transform_block = self.transform
        self._check_head_recorded(head, state)
        return state

    def _check_head_recorded(self, head: MetadataBlock, state: ChainState) -> None:
        """The head's own event must be the latest of its kind: a state saved one block early
        and labelled with the next head fails here."""
        event = head.event
        if isinstance(event, Seed):
            recorded = state.seed_block == self.head
        elif isinstance(event, (AddData, ExecuteTransform)):
            recorded = state.last_data_block == self.head
        elif isinstance(event, SetDataSchema):
            recorded = state.schema_block == self.head
        elif isinstance(event, SetVocab):
            recorded = state.vocab_block == self.head
        elif isinstance(event, SetPollingSource):
            recorded = state.polling_source_block == self.head
        elif isinstance(event, DisablePollingSource):
            recorded = state.polling_source is None
        elif isinstance(event, AddPushSource):
            recorded = state.push_source_blocks.get(event.source_name) == self.head
        elif isinstance(event, DisablePushSource):
            recorded = event.source_name not in state.push_sources
        elif isinstance(event, SetTransform):
            recorded = state.transform_block == self.head
        else:
            recorded = True  # SetInfo, SetLicense, SetAttachments are not part of the state
        if not recorded:
            raise self._error(f"it does not reflect its head's {type(event).__name__} event")

    async def _event(self, read_block: ReadBlock, hash: Multihash, kinds: Any, role: str) -> Any:
        block = await read_block(hash)
        if not isinstance(block.event, kinds):
            raise self._error(f"{role} {hash} holds a {type(block.event).__name__}")
        if block.sequence_number > self.sequence_number:
            raise self._error(f"{role} {hash} is block #{block.sequence_number}, after the head")
        return block.event

    def _require_kind(self, kind: DatasetKind, expected: DatasetKind, what: str) -> None:
        if kind is not expected:
            raise self._error(f"it names a {what} event, which a {kind.value} dataset cannot have")

    def _error(self, problem: str) -> SavedStateError:
        return SavedStateError(f"saved chain state of {self.dataset_id} at {self.head}: {problem}")


def _text(hash: Multihash | None) -> str | None:
    return None if hash is None else str(hash)


def _hash(text: object) -> Multihash:
    if not isinstance(text, str):
        raise SavedStateError(f"saved chain state holds {text!r} where a block hash belongs")
    return Multihash.from_multibase(text)


def _optional_hash(text: object) -> Multihash | None:
    return None if text is None else _hash(text)
