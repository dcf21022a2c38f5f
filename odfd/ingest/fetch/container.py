"""FetchStep::Container: run an OCI image that writes the new data to its stdout.

The container runtime on the machine runs it (``podman``, else ``docker``), with the contract the
reference defines: the previous source state comes in as ``ODF_ETAG`` / ``ODF_LAST_MODIFIED``
(empty when there is none), the container writes the new state to the files named by
``ODF_NEW_ETAG_PATH`` / ``ODF_NEW_LAST_MODIFIED_PATH`` and creates ``ODF_NEW_HAS_MORE_DATA_PATH``
when another run should follow; ``ODF_BATCH_SIZE`` suggests how many records to return per run.
An unchanged state with no output means "nothing new".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

from odfd.ingest.errors import FetchError, IngestError, UnsupportedError
from odfd.ingest.fetch.base import (
    KIND_ETAG,
    KIND_LAST_MODIFIED,
    POLLING_SOURCE_NAME,
    Fetched,
)
from odfd.ingest.template import render
from protocol.errors import ParseError
from protocol.model import FetchStepContainer, SourceState, Timestamp

#: Runtimes tried in this order; the first found on PATH runs the image.
RUNTIMES = ("podman", "docker")
#: Where the output folder is mounted inside the container.
OUT_MOUNT = "/opt/odf/out"
ENV_BATCH_SIZE = "ODF_BATCH_SIZE"
#: Records per run a container is asked for unless the step's env sets ``ODF_BATCH_SIZE``.
DEFAULT_BATCH_SIZE = 10_000
#: ``podman run`` / ``docker run`` exit statuses that are the runtime's own failures.
_RUNTIME_FAILURES = {125: "could not run it", 126: "could not invoke its command",
                     127: "found no such command in it"}  # fmt: skip


class ContainerFetcher:
    """Fetches ``FetchStepContainer`` sources."""

    def fetch(
        self,
        step: FetchStepContainer,
        prev_state: SourceState | None,
        work_dir: Path,
        system_time: Timestamp,
    ) -> Fetched | None:
        runtime = _runtime()
        image = render(step.image, "fetch.image")
        where = f"fetch.container: image {image}"
        run_id = uuid.uuid4().hex
        work_dir.mkdir(parents=True, exist_ok=True)
        out_dir = work_dir / f"container-{run_id}"
        out_dir.mkdir()
        out_dir.chmod(0o777)  # the image may run as any user
        # The step's variables (secrets, maybe) go through a private file, not the command line.
        env_file = work_dir / f"fetch-{run_id}.env"
        env_file.touch(mode=0o600)
        env_file.write_text("".join(f"{k}={v}\n" for k, v in _step_env(step).items()))
        argv = [runtime, "run", "--rm", "--name", f"odfd-fetch-{run_id}"]
        argv += ["--volume", f"{out_dir.absolute()}:{OUT_MOUNT}", "--env-file", str(env_file)]
        for name, value in _contract_env(prev_state).items():
            argv += ["--env", f"{name}={value}"]
        command = list(step.command or ())
        if command:
            argv += ["--entrypoint", command[0]]
        argv += [image, *command[1:]]
        argv += [render(a, f"fetch.args[{i}]") for i, a in enumerate(step.args or ())]
        target = work_dir / f"fetch-{run_id}"
        _run(argv, target, work_dir / f"fetch-{run_id}.stderr", where)

        state = _new_state(out_dir, where)
        has_more = (out_dir / "new-has-more-data").exists()
        if state is not None and state == prev_state:
            if target.stat().st_size != 0:
                raise FetchError(
                    f"{where} wrote data to stdout but left the source state unchanged"
                )
            return None
        return Fetched(target, True, state, None, has_more=has_more)


def _contract_env(prev_state: SourceState | None) -> dict[str, str]:
    """The previous state in, and where to write the new one."""
    etag = prev_state.value if prev_state is not None and prev_state.kind == KIND_ETAG else ""
    modified = (
        prev_state.value if prev_state is not None and prev_state.kind == KIND_LAST_MODIFIED else ""
    )
    return {
        "ODF_ETAG": etag,
        "ODF_LAST_MODIFIED": modified,
        "ODF_NEW_ETAG_PATH": f"{OUT_MOUNT}/new-etag",
        "ODF_NEW_LAST_MODIFIED_PATH": f"{OUT_MOUNT}/new-last-modified",
        "ODF_NEW_HAS_MORE_DATA_PATH": f"{OUT_MOUNT}/new-has-more-data",
    }


def _run(argv: list[str], target: Path, stderr_path: Path, where: str) -> None:
    """Runs the container, its stdout into ``target``; a failure names the last stderr line."""
    with open(target, "wb") as out, open(stderr_path, "wb") as err:
        status = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err).returncode
    if status == 0:
        return
    stderr = stderr_path.read_text(errors="replace").strip().splitlines()
    last = stderr[-1].strip() if stderr else "no message on stderr"
    failure = _RUNTIME_FAILURES.get(status)
    if failure is not None:
        raise FetchError(f"{where}: {argv[0]} {failure}: {last}")
    raise FetchError(f"{where} exited with status {status}: {last}")


def _runtime() -> str:
    for name in RUNTIMES:
        if shutil.which(name) is not None:
            return name
    raise UnsupportedError("fetch.container: no container runtime found (install podman or docker)")


def _step_env(step: FetchStepContainer) -> dict[str, str]:
    """The step's variables: a value is a template; no value passes odfd's own variable on.
    ``ODF_BATCH_SIZE`` (records per run the image is asked for) defaults to the reference's."""
    env: dict[str, str] = {}
    for var in step.env or ():
        if var.value is not None:
            value = render(var.value, f"fetch.env.{var.name}")
        elif var.name in os.environ:
            value = os.environ[var.name]
        else:
            raise IngestError(
                f"fetch.env.{var.name}: has no value and odfd's environment does not set it"
            )
        if "\n" in value or "\r" in value:
            raise IngestError(f"fetch.env.{var.name}: a value cannot span several lines")
        env[var.name] = value
    batch = env.setdefault(ENV_BATCH_SIZE, str(DEFAULT_BATCH_SIZE))
    if not batch.strip().isdigit():
        raise IngestError(f"fetch.env.{ENV_BATCH_SIZE} must be a whole number, not {batch!r}")
    return env


def _new_state(out_dir: Path, where: str) -> SourceState | None:
    etag = out_dir / "new-etag"
    if etag.exists():
        return SourceState(source_name=POLLING_SOURCE_NAME, kind=KIND_ETAG, value=etag.read_text())
    modified = out_dir / "new-last-modified"
    if modified.exists():
        text = modified.read_text()
        try:
            value = Timestamp.parse_rfc3339(text.strip())
        except ParseError:
            raise FetchError(
                f"{where} wrote a last-modified time that is not RFC 3339: {text.strip()!r}"
            ) from None
        return SourceState(
            source_name=POLLING_SOURCE_NAME, kind=KIND_LAST_MODIFIED, value=value.to_rfc3339()
        )
    return None
