"""Prepare steps of a polling source: decompress (gzip, zip) and pipe through a command."""

from __future__ import annotations

import fnmatch
import gzip
import shutil
import subprocess
import uuid
import zipfile
from collections.abc import Sequence
from pathlib import Path

from odfd.ingest.errors import PrepareError, UnsupportedError
from protocol.model import CompressionFormat, PrepStepDecompress, PrepStepPipe

_CHUNK = 1 << 20
_STDERR_TAIL = 2000


def prepare(steps: Sequence[object], source: Path, work_dir: Path) -> list[Path]:
    """Runs the steps in order; returns the files it created, the last one being the result.

    With no steps nothing is created and the source is read as is.
    """
    created: list[Path] = []
    current = source
    try:
        for number, step in enumerate(steps, start=1):
            work_dir.mkdir(parents=True, exist_ok=True)
            target = work_dir / f"prepare-{uuid.uuid4().hex}"
            created.append(target)
            where = f"prepare[{number}]"
            if isinstance(step, PrepStepDecompress):
                _decompress(step, current, target, where)
            elif isinstance(step, PrepStepPipe):
                _pipe(step, current, target, where)
            else:
                raise UnsupportedError(
                    f"{where}: prepare step {type(step).__name__} is not supported"
                )
            current = target
    except BaseException:
        for path in created:
            path.unlink(missing_ok=True)
        raise
    return created


def _decompress(step: PrepStepDecompress, source: Path, target: Path, where: str) -> None:
    if step.format == CompressionFormat.GZIP:
        try:
            with gzip.open(source, "rb") as inp, open(target, "wb") as out:
                shutil.copyfileobj(inp, out, _CHUNK)
        except (OSError, EOFError) as err:
            raise PrepareError(f"{where}: {source} is not a valid gzip file: {err}") from err
        return
    if step.format == CompressionFormat.ZIP:
        try:
            with zipfile.ZipFile(source) as archive:
                member = _zip_member(archive, step.sub_path, where)
                with archive.open(member) as inp, open(target, "wb") as out:
                    shutil.copyfileobj(inp, out, _CHUNK)
        except (zipfile.BadZipFile, OSError) as err:
            raise PrepareError(f"{where}: {source} is not a valid zip archive: {err}") from err
        return
    raise UnsupportedError(f"{where}: compression format {step.format} is not supported")


def _zip_member(archive: zipfile.ZipFile, sub_path: str | None, where: str) -> zipfile.ZipInfo:
    files = [info for info in archive.infolist() if not info.is_dir()]
    if not files:
        raise PrepareError(f"{where}: the zip archive is empty")
    if sub_path is None:
        return files[0]
    matches = [info for info in files if fnmatch.fnmatchcase(info.filename, sub_path)]
    if not matches:
        names = ", ".join(info.filename for info in files[:10])
        raise PrepareError(
            f"{where}: no entry of the zip archive matches subPath {sub_path!r} (entries: {names})"
        )
    if len(matches) > 1:
        names = ", ".join(info.filename for info in matches[:10])
        raise PrepareError(f"{where}: subPath {sub_path!r} matches several entries: {names}")
    return matches[0]


def _pipe(step: PrepStepPipe, source: Path, target: Path, where: str) -> None:
    if not step.command:
        raise PrepareError(f"{where}: pipe command is empty")
    try:
        with open(source, "rb") as inp, open(target, "wb") as out:
            completed = subprocess.run(
                list(step.command), stdin=inp, stdout=out, stderr=subprocess.PIPE, check=False
            )
    except OSError as err:
        raise PrepareError(f"{where}: cannot run {step.command[0]!r}: {err}") from err
    if completed.returncode != 0:
        stderr = completed.stderr.decode(errors="replace").strip()[-_STDERR_TAIL:]
        raise PrepareError(
            f"{where}: command {' '.join(step.command)!r} exited with code {completed.returncode}"
            + (f": {stderr}" if stderr else "")
        )
