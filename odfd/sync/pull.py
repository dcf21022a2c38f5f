"""``odfd pull URL`` / ``odfd pull DATASET`` (from its remote): bring a remote dataset's new
history into the workspace without trusting the remote.

1. find the local side (existing dataset, or a staging folder for a new one) and its head;
2. get the remote's new blocks: Smart Transfer Protocol (one tarball from the last shared block)
   when the server speaks it, else walk the chain by the Simple Transfer Protocol; every block is
   hash-checked and must link; divergence is refused unless ``force``;
3. fetch missing data/checkpoint files in parallel into staging, each checked against hash and
   size, each data file read against its blocks as soon as it is there (a block's files start
   downloading once the walk has verified it, while the walk goes on: by the Smart protocol
   the tarball's blocks are checked newest first, a run at a time);
4. name the fetched objects (one ``syncfs``, then renames: ``StagedObjects``), then commit: chain
   rules and object presence are checked, ``head`` moves last by compare-and-swap.
On a verification failure everything this pull stored is removed again; on a network failure
what was fetched and checked is named and kept, so running the pull again resumes where it
stopped (the catalog's ``transfers`` row says how far it got).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path

import aiohttp

from odfd.sync.data_checks import DataChecks
from odfd.sync.errors import (
    ChainPoint,
    CorruptSourceError,
    DivergedError,
    RemoteNotFoundError,
    SyncError,
)
from odfd.sync.objects import (
    ChunkSource,
    ObjectFetcher,
    ObjectRef,
    first_error,
    http_source,
    missing_objects,
    objects_of,
    store_for,
)
from odfd.sync.progress import Progress
from odfd.sync.target import (
    PullTarget,
    check_same_dataset,
    commit,
    discard_staging,
    discard_staging_if_empty,
    needs_reset,
    open_target,
    release_target,
    remember_remote,
)
from odfd.sync.transport import smart_client as smart
from odfd.sync.transport.base import RemoteView, SmartEndpoint, Transport
from odfd.sync.transport.did import owner_of
from odfd.sync.transport.settings import TransportSettings
from odfd.sync.transport.url import parse_remote
from odfd.sync.trust import HeadDecision, TrustOptions, check_walked, decide_head
from odfd.sync.trust import remember as remember_signed
from odfd.sync.walk import (
    MAX_CHAIN_LENGTH,
    BlockStash,
    LocalCursor,
    VerifiedBlock,
    WalkResult,
    collector_paused,
    match_linked_run,
    walk_remote_chain,
)
from protocol.codec.flatbuffers import peek_prev_block_hash
from protocol.errors import DecodeError, OdfError
from protocol.identity import DatasetId, Multihash
from protocol.model import SetVocab
from protocol.transfer.simple import ObjectKind
from protocol.transfer.smart import messages as m
from protocol.transfer.smart.tarball import TarballError, TarballLimits, unpack_blocks
from storage.catalog import Transfer
from storage.crashpoints import crash_point
from storage.dataset_storage import LocalFiles
from storage.errors import ChainRuleError, RefCasError, StorageError
from storage.stores.http_limits import HttpLimits
from storage.stores.remote import RemoteUnavailableError
from storage.workspace import Workspace

URL_BATCH = 256
"""Objects asked for per Smart Transfer Protocol request (signed URLs expire: ask in batches)."""
_PROGRESS_SAVE_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class PullOptions:
    force: bool = False
    parallel: int = 8
    token: str | None = None
    protocol: str = "auto"
    """``auto`` (smart when offered), ``smart`` or ``simple``."""
    max_blocks: int = MAX_CHAIN_LENGTH
    """Longest remote history accepted (bounds the walk and the metadata tarball)."""
    limits: HttpLimits | None = None
    """Time-outs for every request to the peer (connect, first byte, minimum rate); ``None``:
    the transport settings'."""
    operation_timeout: float | None = None
    """Give up on the whole pull after this many seconds (``None``: no limit)."""
    allow_unsigned: bool = False
    """Accept a missing or invalid signed head (``odfd.sync.trust``); ``force`` also does."""


@dataclass(frozen=True, slots=True)
class PullResult:
    alias: str
    dataset_id: DatasetId | None
    remote: str
    protocol: str
    old_head: Multihash | None
    new_head: Multihash | None
    num_blocks: int = 0
    num_objects: int = 0
    num_bytes: int = 0
    local_ahead: int = 0
    """Blocks the local side has beyond the remote head (nothing pulled then)."""
    resumed_objects: int = 0
    """Objects an earlier, interrupted pull had already fetched."""
    recovered: tuple[str, ...] = ()
    """What was found on disk and put right on the way (see ``storage.orphans``)."""
    trust: str = "unsigned"
    """``signed`` when the head pulled to carries the owner's verified signature."""
    trust_note: str | None = None

    @property
    def updated(self) -> bool:
        return self.num_blocks > 0 or self.new_head != self.old_head

    def describe(self) -> str:
        if self.num_blocks == 0 and self.updated:
            return (
                f"local head reset to the remote's, {self.new_head} (by {self.protocol} protocol)"
            )
        if self.updated:
            text = (
                f"{self.num_blocks} block(s), {self.num_objects} object(s) ({self.num_bytes} bytes) "
                f"by {self.protocol} protocol; head {self.new_head}"
            )
            if self.resumed_objects:
                text += f" (resumed: {self.resumed_objects} object(s) were already fetched)"
            return text
        if self.local_ahead:
            return f"local history is {self.local_ahead} block(s) ahead of {self.remote}; nothing to pull"
        return "up to date"


async def pull(
    workspace: Workspace,
    url: str,
    *,
    alias: str | None = None,
    options: PullOptions = PullOptions(),
    progress: Progress | None = None,
    session: aiohttp.ClientSession | None = None,
    settings: TransportSettings = TransportSettings(),
) -> PullResult:
    """Pull the dataset at ``url`` into the workspace (as ``alias``, else the one already
    pulled from there, else the URL's last segment), reaching it with ``settings``."""
    limits = options.limits or settings.limits
    remote = parse_remote(
        url, settings, token=options.token, limits=limits, protocol=options.protocol
    )
    target = await open_target(workspace, remote.url, alias, remote.default_name())
    progress = progress or Progress(f"pull {target.alias}", enabled=False)
    try:
        async with _session(session, limits) as http:
            run = _PullRun(target, remote, options, progress, http, limits)
            deadline = asyncio.timeout(options.operation_timeout)
            try:
                async with deadline:
                    result = await run.execute()
            except TimeoutError:
                if not deadline.expired():
                    raise
                raise PullTimeoutError(
                    f"pull of {remote.url} into {target.alias} took longer than "
                    f"{options.operation_timeout:g} s (operation_timeout); abandoned, "
                    "what was verified is kept for the next pull"
                ) from None
            finally:
                progress.finish()
    finally:
        release_target(target)
    return dataclasses.replace(result, recovered=tuple(target.recovered))


async def pull_from_remotes(
    workspace: Workspace,
    ref: str,
    *,
    options: PullOptions = PullOptions(),
    progress: Progress | None = None,
    settings: TransportSettings = TransportSettings(),
) -> list[PullResult]:
    """Sync a local dataset from every pull remote recorded for it."""
    record = await workspace.resolve(ref)
    remotes = await workspace.catalog.remote_aliases(record.id, "pull")
    if not remotes:
        raise SyncError(
            f"dataset {record.alias} has no remote to pull from (pull it from a URL first)"
        )
    return [
        await pull(
            workspace,
            url,
            alias=record.alias,
            options=options,
            progress=progress,
            settings=settings,
        )
        for url in remotes
    ]


class PullTimeoutError(SyncError):
    """The whole pull ran longer than ``operation_timeout``."""


@asynccontextmanager
async def _session(
    session: aiohttp.ClientSession | None, limits: HttpLimits
) -> AsyncIterator[aiohttp.ClientSession]:
    if session is not None:
        yield session
        return
    async with aiohttp.ClientSession(timeout=limits.client_timeout()) as own:
        yield own


class _PullRun:
    def __init__(
        self,
        target: PullTarget,
        remote: Transport,
        options: PullOptions,
        progress: Progress,
        session: aiohttp.ClientSession,
        limits: HttpLimits,
    ) -> None:
        self.target = target
        self.remote = remote
        self.options = options
        self.progress = progress
        self.session = session
        self.limits = limits
        self.stash = BlockStash(target.dataset.blocks)
        self.fetcher = ObjectFetcher(
            target.dataset,
            where=remote.url,
            parallel=options.parallel,
            on_done=self._object_done,
            on_bytes=progress.add_bytes,
            defer_naming=True,
        )
        self.checks = DataChecks(remote.url)
        self._stashing: asyncio.Future[None] | None = None
        self.transfer: Transfer | None = None
        self.resumed = 0
        self.decision: HeadDecision | None = None
        self._saved_at = 0.0
        self._planned = False
        self._fetched_early: list[ObjectRef] = []
        self._vocab: tuple[SetVocab | None] | None = None  # once read
        self._walk_objects: tuple[WalkResult, list[ObjectRef]] | None = None

    async def execute(self) -> PullResult:
        try:
            result = await self._execute()
        except asyncio.CancelledError:
            # The whole-operation time-out (or the caller) stopped us: keep what was verified.
            await self._keep_progress()
            raise
        except (
            RemoteUnavailableError,
            smart.TransferFlowError,
            TimeoutError,
            aiohttp.ClientError,
        ) as err:
            # Interrupted, not lied to: keep what was verified so the next pull resumes.
            await self._keep_progress()
            if isinstance(err, OdfError):
                raise
            raise SyncError(
                f"{self.remote.url}: the transfer failed: {err or type(err).__name__}"
            ) from None
        except BaseException as err:
            await self.checks.cancel()
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
            await self._settle_stash()
            await self.stash.discard_added()
            await self.fetcher.discard_added()
            await discard_staging(self.target)
            if isinstance(err, ChainRuleError):
                raise CorruptSourceError(
                    f"{self.remote.url}: the remote's history breaks a chain rule: {err}"
                ) from None
            raise
        if self.target.is_new:
            await discard_staging(self.target)  # nothing was new: no dataset to keep
        return result

    async def _stashed(self) -> None:
        """Wait for the blocks being stored beside the downloads (their error, if any, is
        raised: a block that could not be stored fails the pull)."""
        stashing, self._stashing = self._stashing, None
        if stashing is not None:
            await stashing

    async def _settle_stash(self) -> None:
        """On the way out of a failed pull: let the block writes end (they run in threads that
        a cancellation cannot stop), so ``stash.added`` is complete before it is kept or
        discarded."""
        try:
            await asyncio.shield(self._stashed())
        except Exception:  # noqa: BLE001 - the pull's own error is the one reported
            pass

    async def _keep_progress(self) -> None:
        await self.checks.cancel()
        await self._settle_stash()
        await self.stash.flush()
        await self.fetcher.name_fetched()
        await self._save_progress(force=True)
        await discard_staging_if_empty(self.target)

    async def _execute(self) -> PullResult:
        endpoint = self.remote.smart
        if endpoint is not None:
            try:
                return await self._smart(endpoint)
            except smart.SmartUnavailableError:
                if endpoint.required:
                    raise
        return await self._simple()

    # --- protocols ------------------------------------------------------------------------------

    async def _smart(self, endpoint: SmartEndpoint) -> PullResult:
        local = self.target.head
        async with self.remote.open(self.session) as view:
            served = await view.head()
            if served is None:
                raise RemoteNotFoundError(
                    f"{self.remote.url}: no dataset there (refs/head is missing)"
                )
            remote_head = await self._decide(view, served)
            if remote_head == local.hash:
                return await self._up_to_date("smart", local)
        stop_at = remote_head if remote_head != served else None
        async with smart.connect(
            self.session,
            endpoint.http_base,
            "pull",
            endpoint.token,
            receive_timeout=self.limits.first_byte,
        ) as channel:
            try:
                plan = await smart.pull_plan(channel, local.hash, self.options.force, stop_at)
            except smart.RemoteTransferError as err:
                if err.error.kind != "InvalidInterval":
                    raise
                plan = None  # diverged or behind: resolved below, once this session is closed
            if plan is not None:
                return await self._smart_transfer(channel, plan)
        # The Simple Transfer Protocol walk finds where the histories split, and resolves it.
        return await self._simple(protocol="smart+simple")

    async def _smart_transfer(
        self, channel: smart.SmartChannel, plan: m.TransferPlan
    ) -> PullResult:
        local = self.target.head
        if plan.num_blocks == 0:
            return await self._up_to_date("smart", local)
        batch = await smart.pull_metadata(channel)
        if batch.media_type != m.MEDIA_TAR_GZ or batch.encoding != m.ENCODING_RAW:
            raise CorruptSourceError(
                f"{self.remote.url}: unsupported metadata batch "
                f"{batch.media_type} ({batch.encoding})"
            )
        try:
            with collector_paused():  # its lasting objects go straight to the oldest generation
                blocks = unpack_blocks(
                    batch.payload,
                    expected_count=plan.num_blocks,
                    limits=TarballLimits(max_blocks=self.options.max_blocks),
                )
        except TarballError as err:
            raise CorruptSourceError(f"{self.remote.url}: {err}") from None
        begin_after = local if local.hash is not None else None
        if self.options.force and blocks and _starts_at_seed(blocks[0][1]):
            begin_after = None  # a forced pull of a diverged history is sent from the seed
        early = _EarlyObjects(self.target, local, self.options.force)
        if local.hash is None:
            await early.list_held()  # as ``_simple`` does: no failing stat per object offered
        self.checks.guess_vocab(await self._local_vocab())
        urls: dict[tuple[m.ObjectType, Multihash], m.TransferUrl] = {}

        async def checked(items: list[VerifiedBlock]) -> None:
            for item in items:
                self.checks.expect(item)  # its file is checked as soon as it is stored
            await early.offer_run(items)

        async def with_urls() -> AsyncIterator[ObjectRef]:
            # One batch's URLs are asked for when the downloads reach it: no URL waits long
            # enough to expire, and no batch waits for the last download of the one before.
            async for chunk in early.batches(URL_BATCH):
                files = tuple(
                    m.ObjectFileReference(_object_type(r.kind), r.hash, r.size) for r in chunk
                )
                urls.update(await smart.pull_object_urls(channel, files))
                for ref in chunk:
                    yield ref

        # The objects of each block checked are fetched while the older blocks are still
        # checked, newest first as by the Simple protocol; the commit waits for both.
        source = http_source(self.session, partial(_url_of, urls), self.limits)
        async with self._fetching(early, with_urls(), source):
            walk = await match_linked_run(
                blocks,
                begin_after,
                LocalCursor(self.target.dataset.chain, local.hash, local.sequence_number),
                where=self.remote.url,
                max_blocks=self.options.max_blocks,
                on_checked=checked,
            )
            self._check_walk(walk)
            data_of = dict(blocks)
            # The blocks are stored while the objects download (both wait mostly on the
            # device and the network, not on each other); the commit waits for both.
            self._stashing = asyncio.ensure_future(
                self.stash.add_many([(item.hash, data_of[item.hash]) for item in walk.new_blocks])
            )
            self.progress.add_blocks(len(walk.new_blocks))
            await early.offer_all(self._objects_of(walk))
            await self._plan_objects(walk, early)
        return await self._commit(walk, "smart")

    async def _simple(self, protocol: str = "simple") -> PullResult:
        local = self.target.head
        async with self.remote.open(self.session) as view:
            served = await view.head()
            if served is None:
                raise RemoteNotFoundError(f"{view.label}: no dataset there (refs/head is missing)")
            remote_head = await self._decide(view, served)
            cursor = LocalCursor(self.target.dataset.chain, local.hash, local.sequence_number)
            below = -1 if local.sequence_number is None else local.sequence_number
            early = _EarlyObjects(self.target, local, self.options.force)
            if local.hash is None:
                await self.stash.list_held()
                await early.list_held()
            self.checks.guess_vocab(await self._local_vocab())

            async def walked(item: VerifiedBlock) -> None:
                self.checks.expect(item)  # its file is checked as soon as it is stored
                await early.offer(item)

            # The objects of each block walked are fetched while the walk goes on toward the
            # seed (both wait on the remote); the commit waits for both.
            async with self._fetching(early, early.wanted(), view.objects):
                async with (
                    view.walk_blocks(self.stash.store, below) as fetch_block,
                    self._staging_ahead(view),
                ):
                    walk = await walk_remote_chain(
                        remote_head,
                        fetch_block,
                        cursor,
                        self.stash,
                        where=view.label,
                        on_block=self.progress.add_blocks,
                        on_new=walked,
                        max_blocks=self.options.max_blocks,
                        flush=False,
                    )
                # The last blocks are stored while the objects download (the last write of a
                # walk over an IPFS export is most of its blocks); the commit waits for them.
                self._stashing = asyncio.ensure_future(self.stash.flush())
                self._check_walk(walk)
                if walk.up_to_date and not (self.options.force and needs_reset(self.target, walk)):
                    await self._stashed()
                    await self._remember_signed()
                    return self._result(protocol, walk)
                await early.offer_all(self._objects_of(walk))
                await self._plan_objects(walk, early)
            return await self._commit(walk, protocol)

    @asynccontextmanager
    async def _fetching(
        self, early: _EarlyObjects, wanted: AsyncIterator[ObjectRef], source: ChunkSource
    ) -> AsyncIterator[None]:
        """Fetch ``wanted`` from ``source`` while the body walks the blocks that offer them to
        ``early`` (closed when the body ends, so the fetch ends with its last object); the first
        error of either is raised, not their group."""
        try:
            async with asyncio.TaskGroup() as group:
                fetching = group.create_task(self.fetcher.fetch_all(wanted, source))
                try:
                    yield
                finally:
                    early.close()
                await fetching
        except BaseExceptionGroup as errors:
            raise first_error(errors) from None

    @asynccontextmanager
    async def _staging_ahead(self, view: RemoteView) -> AsyncIterator[None]:
        """Stage (and begin checking) the data files ``view`` sends before the walk names them,
        while the body walks; ``fetch_one`` takes those a block names, naming drops the rest."""
        objects = view.objects_ahead()
        if objects is None:
            yield
            return

        def staged(ref: ObjectRef) -> None:
            self.checks.start_ahead(ref.hash, self._paths_of(ref))

        staging = asyncio.ensure_future(self.fetcher.stage_ahead(objects, staged))
        try:
            yield
        except BaseException:
            staging.cancel()
            await asyncio.gather(staging, return_exceptions=True)
            raise
        await staging

    # --- shared steps ---------------------------------------------------------------------------

    async def _decide(self, view: RemoteView, served: Multihash) -> Multihash:
        """The head to pull to: the remote's signed head when it has a valid one."""
        record = self.target.record
        self.decision = await decide_head(
            self.target.workspace,
            record.id if record is not None else None,
            served,
            await view.signed_head(),
            self.remote.url,
            TrustOptions(self.options.allow_unsigned, self.options.force, owner_of(self.remote)),
        )
        return self.decision.head

    async def _up_to_date(self, protocol: str, local: ChainPoint) -> PullResult:
        await self._remember_signed()
        return self._result(protocol, WalkResult([], local, local, local))

    async def _remember_signed(self) -> None:
        if self.decision is not None and self.target.record is not None:
            await remember_signed(
                self.target.workspace, self.target.dataset, self.decision, self.remote.url
            )

    def _check_walk(self, walk: WalkResult) -> None:
        check_same_dataset(self.target, walk, self.remote.url)
        owner = owner_of(self.remote)
        if owner is not None and walk.dataset_id is not None and walk.dataset_id != owner:
            raise SyncError(
                f"{self.remote.url}: the IPNS name leads to the history of {walk.dataset_id}, "
                "not of this DID's dataset"
            )
        if self.decision is not None and walk.new_blocks:
            dataset_id = walk.dataset_id or (
                self.target.record.id if self.target.record is not None else None
            )
            check_walked(self.decision, dataset_id, walk.new_blocks[-1].block.sequence_number)
        if walk.diverged and not self.options.force:
            raise DivergedError(
                f"pull {self.remote.url} into {self.target.alias}",
                walk.local,
                walk.remote,
                walk.common,
                hint="use --force to replace the local history with the remote's",
            )
        if self.target.is_new and walk.new_blocks and walk.dataset_id is None:
            raise CorruptSourceError(
                f"{self.remote.url}: the history does not start with a Seed block"
            )

    async def _plan_objects(
        self, walk: WalkResult, early: _EarlyObjects | None = None
    ) -> list[ObjectRef]:
        """Plan the checks and record the transfer; the objects still to fetch (with
        ``early``: those it found missing, already being fetched)."""
        self.checks.plan(walk.new_blocks, await self._local_vocab())
        for ref in self._fetched_early:
            self.checks.start(ref.hash, self._paths_of(ref))
        self._fetched_early.clear()
        self._planned = True
        wanted = self._objects_of(walk)
        if early is None:
            refs = await missing_objects(self.target.dataset, wanted)
        else:
            refs = early.missing
        dataset_id = walk.dataset_id or (self.target.record.id if self.target.record else None)
        if dataset_id is not None and walk.remote.hash is not None:
            catalog = self.target.workspace.catalog
            self.transfer = await catalog.begin_transfer(
                dataset_id,
                self.remote.url,
                "pull",
                walk.remote.hash,
                self.target.head.hash,
                len(wanted),
            )
            self.resumed = len(wanted) - len(refs)
            await catalog.update_transfer(
                self.transfer.id, objects_done=self.resumed, bytes_done=self.transfer.bytes_done
            )
        self.progress.set_phase("objects", objects_total=len(refs))
        return refs

    def _objects_of(self, walk: WalkResult) -> list[ObjectRef]:
        """``objects_of`` the walk's new blocks, gathered once (three steps ask for them)."""
        if self._walk_objects is None or self._walk_objects[0] is not walk:
            self._walk_objects = (walk, objects_of(walk.new_blocks))
        return self._walk_objects[1]

    async def _local_vocab(self) -> SetVocab | None:
        """The local head's vocabulary (the one new blocks start from), read once."""
        if self._vocab is None:
            vocab = None
            if self.target.record is not None and self.target.head.hash is not None:
                vocab = (await self.target.dataset.chain.state()).vocab
            self._vocab = (vocab,)
        return self._vocab[0]

    async def _object_done(self, ref: ObjectRef) -> None:
        if ref.kind is ObjectKind.DATA:
            if not self.checks.start(ref.hash, self._paths_of(ref)) and not self._planned:
                # Its block was not walked by this pull (a resumed stash): checked once planned.
                self._fetched_early.append(ref)
        self.progress.object_done()
        await self._save_progress()

    async def _save_progress(self, *, force: bool = False) -> None:
        if self.transfer is None or (
            not force and time.monotonic() - self._saved_at < _PROGRESS_SAVE_SECONDS
        ):
            return
        self._saved_at = time.monotonic()
        await self.target.workspace.catalog.update_transfer(
            self.transfer.id,
            objects_done=self.resumed + self.progress.objects,
            bytes_done=self.progress.bytes,
        )

    def _paths_of(self, ref: ObjectRef) -> tuple[Path, ...]:
        """Where a data file is read: where it was staged, if it still is, else its name (the
        check opens the first it finds, so a file named meanwhile is found all the same)."""
        staged = self.fetcher.readable_path(ref)
        named = self._data_files.path_of(ref.hash)
        return (named,) if staged is None else (staged, named)

    @cached_property
    def _data_files(self) -> LocalFiles:
        """The data store, checked once to hand out paths (a runtime Protocol ``isinstance``
        per object was ~15 ms of a 1,000-file pull's event loop)."""
        store = self.target.dataset.data
        assert isinstance(store, LocalFiles)  # a folder, or a bucket through the cache
        return store

    async def _commit(self, walk: WalkResult, protocol: str) -> PullResult:
        await self._stashed()
        # Each stored block is re-read and hash-checked before head moves: by the child process
        # that wrote a large batch of them (``stash.read_back``), the others here while the last
        # data files are checked and the objects named (the commit re-read all of them after
        # those: ~0.1 s for 10,000 blocks).
        rechecking = asyncio.ensure_future(
            self.target.dataset.chain.check_stored(
                [item.hash for item in walk.new_blocks if item.hash not in self.stash.read_back]
            )
        )
        try:
            self.progress.set_phase("checking data")
            data = {ref.hash: ref for ref in self._objects_of(walk) if ref.kind is ObjectKind.DATA}
            await self.checks.verify(data, lambda hash: self._paths_of(data[hash]))
            self.progress.set_phase("naming objects")
            crash_point("pull.objects-staged")
            await self.fetcher.name_fetched()
        except BaseException:
            rechecking.cancel()
            await asyncio.gather(rechecking, return_exceptions=True)
            raise
        self.progress.set_phase("committing")
        crash_point("pull.objects-fetched")
        try:
            await rechecking
            new_head, _ = await commit(
                self.target, walk, force=self.options.force, stored_checked=True
            )
        except RefCasError as err:
            raise SyncError(
                f"{self.target.alias} changed locally during the pull ({err}); pull again"
            ) from None
        except StorageError as err:
            if isinstance(err, ChainRuleError):
                raise
            raise SyncError(f"committing the pull of {self.remote.url}: {err}") from None
        catalog = self.target.workspace.catalog
        assert self.target.record is not None  # committed
        await remember_remote(self.target, self.remote.url)
        await catalog.record_synced(self.target.record.id, self.remote.url, new_head)
        await self._remember_signed()
        if self.transfer is not None:
            await catalog.end_transfer(self.transfer.id)
        return self._result(protocol, walk, new_head)

    def _result(
        self, protocol: str, walk: WalkResult, new_head: Multihash | None = None
    ) -> PullResult:
        local = self.target.head
        ahead = 0
        if (
            not walk.new_blocks
            and walk.common is not None
            and local.sequence_number is not None
            and walk.common.sequence_number is not None
        ):
            ahead = local.sequence_number - walk.common.sequence_number
        record = self.target.record
        return PullResult(
            alias=self.target.alias,
            dataset_id=record.id if record else None,
            remote=self.remote.url,
            protocol=protocol,
            old_head=local.hash,
            new_head=new_head or local.hash,
            num_blocks=len(walk.new_blocks),
            num_objects=self.progress.objects,
            num_bytes=self.progress.bytes,
            local_ahead=ahead,
            resumed_objects=self.resumed,
            trust=self.decision.trust if self.decision is not None else "unsigned",
            trust_note=self.decision.note if self.decision is not None else None,
        )


class _EarlyObjects:
    """The objects of the blocks a walk verifies, offered for fetching as they come.

    Without ``force``, only blocks newer than the local head are offered during the walk: an
    older new block means the histories diverged, which the pull refuses, and nothing should be
    downloaded for it. Each object is offered once; one already stored (an interrupted pull) is
    counted, not fetched.
    """

    def __init__(self, target: PullTarget, local: ChainPoint, force: bool) -> None:
        self._dataset = target.dataset
        self._above = -1 if force or local.sequence_number is None else local.sequence_number
        self._seen: set[ObjectRef] = set()
        self._queue: asyncio.Queue[ObjectRef | None] = asyncio.Queue()
        self.missing: list[ObjectRef] = []
        self._held: dict[ObjectKind, set[Multihash]] | None = None

    async def list_held(self) -> None:
        """List the data and checkpoint stores once, for a pull into a dataset with no head
        (none held, or an interrupted pull's): each object offered is then looked up in the
        listing, not by a stat on the loop (1,000 failing stats cost a walk 0.6 s under load,
        each waiting to get the GIL back from the checks' threads)."""
        self._held = {
            kind: {hash async for hash in store_for(self._dataset, kind).iter_hashes()}
            for kind in (ObjectKind.DATA, ObjectKind.CHECKPOINT)
        }

    async def offer(self, item: VerifiedBlock) -> None:
        if item.block.sequence_number > self._above:
            await self._offer(objects_of((item,)))

    async def offer_run(self, items: list[VerifiedBlock]) -> None:
        """``offer`` of several blocks at once: one look at the stores, one turn of the loop."""
        await self._offer(
            objects_of(item for item in items if item.block.sequence_number > self._above)
        )

    async def offer_all(self, refs: list[ObjectRef]) -> None:
        """After the walk: every new block's objects (those not offered yet)."""
        await self._offer(refs)

    async def _offer(self, refs: list[ObjectRef]) -> None:
        refs = [ref for ref in refs if ref not in self._seen]
        self._seen.update(refs)
        missing = await missing_objects(self._dataset, refs, self._held)
        for ref in missing:
            self.missing.append(ref)
            self._queue.put_nowait(ref)
        if missing:
            # A walk over blocks already in memory (an IPFS export, a resumed pull's stash)
            # never waits: let the downloads take their turn on the loop.
            await asyncio.sleep(0)

    def close(self) -> None:
        """No more objects: the fetch ends once those offered are stored."""
        self._queue.put_nowait(None)

    async def wanted(self) -> AsyncIterator[ObjectRef]:
        while (ref := await self._queue.get()) is not None:
            yield ref

    async def batches(self, size: int) -> AsyncIterator[list[ObjectRef]]:
        """``wanted`` in lists of up to ``size``: each waits for one object, then takes those
        already offered (a Smart Transfer Protocol request asks for a list's URLs at once)."""
        ended = False
        while not ended:
            first = await self._queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < size and not self._queue.empty():
                ref = self._queue.get_nowait()
                if ref is None:
                    ended = True
                    break
                batch.append(ref)
            yield batch


def _starts_at_seed(data: bytes) -> bool:
    try:
        return peek_prev_block_hash(data) is None
    except DecodeError:
        return False


def _url_of(
    urls: dict[tuple[m.ObjectType, Multihash], m.TransferUrl], ref: ObjectRef
) -> tuple[str, dict[str, str]]:
    """Where the server said to download ``ref`` from, and the headers to send."""
    url = urls[(_object_type(ref.kind), ref.hash)]
    return url.url, dict(url.headers)


def _object_type(kind: ObjectKind) -> m.ObjectType:
    return "DataSlice" if kind is ObjectKind.DATA else "Checkpoint"
