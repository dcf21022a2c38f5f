"""Where things live on disk: the spec's Dataset Layout and the node workspace.

Names follow the reference implementation exactly (folder names, base16 multibase object names,
``refs/head``, ``info/alias``, ``info/config``) so dataset folders move between it and odfd as is.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from protocol.frozen import frozen_dataclass
from protocol.identity import DatasetId, Multihash
from storage.errors import WorkspaceError

HEAD_REF = "head"
ALIAS_INFO = "alias"
CONFIG_INFO = "config"
STAGING_PREFIX = ".pending-"

WORKSPACE_ENV = "ODFD_HOME"
DEFAULT_WORKSPACE_DIR = ".odfd"


def object_name(hash: Multihash) -> str:
    """File name of a block, data or checkpoint object: canonical base16 multibase (``f1620…``)."""
    return hash.to_multibase()


def dataset_dir_name(dataset_id: DatasetId) -> str:
    """Folder name of a dataset in a workspace: its id's multibase without ``did:odf:``."""
    return dataset_id.to_multibase()


@frozen_dataclass
class DatasetLayout:
    """The folders of one dataset (spec "Dataset Layout")."""

    root: Path

    @property
    def blocks_dir(self) -> Path:
        return self.root / "blocks"

    @property
    def refs_dir(self) -> Path:
        return self.root / "refs"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def checkpoints_dir(self) -> Path:
        return self.root / "checkpoints"

    @property
    def info_dir(self) -> Path:
        return self.root / "info"

    def create(self) -> DatasetLayout:
        for folder in (
            self.blocks_dir,
            self.refs_dir,
            self.data_dir,
            self.checkpoints_dir,
            self.info_dir,
        ):
            folder.mkdir(parents=True, exist_ok=True)
        return self

    def looks_like_dataset(self) -> bool:
        """A folder with ``blocks/`` and ``refs/`` is treated as a dataset (head may be missing)."""
        return self.blocks_dir.is_dir() and self.refs_dir.is_dir()


@frozen_dataclass
class WorkspaceLayout:
    """The folders and files of an odfd node workspace."""

    root: Path

    @staticmethod
    def default_root() -> Path:
        """``$ODFD_HOME``, else the nearest enclosing workspace (as git finds its repository),
        else ``./.odfd`` (where ``odfd init`` creates one)."""
        env = os.environ.get(WORKSPACE_ENV)
        if env:
            return Path(env)
        return WorkspaceLayout.enclosing(Path.cwd()) or Path.cwd() / DEFAULT_WORKSPACE_DIR

    @staticmethod
    def enclosing(start: Path) -> Path | None:
        """The workspace folder in ``start`` or the nearest folder above it, if any."""
        start = start.absolute()
        for folder in (start, *start.parents):
            if folder.name == DEFAULT_WORKSPACE_DIR and (folder / "config.toml").is_file():
                return folder
            candidate = folder / DEFAULT_WORKSPACE_DIR
            if (candidate / "config.toml").is_file():
                return candidate
        return None

    @property
    def config_path(self) -> Path:
        return self.root / "config.toml"

    @property
    def catalog_path(self) -> Path:
        return self.root / "catalog.sqlite"

    @property
    def datasets_dir(self) -> Path:
        return self.root / "datasets"

    @property
    def keys_dir(self) -> Path:
        return self.root / "keys"

    @property
    def staging_dir(self) -> Path:
        """Temporary files of the processes using the workspace (``storage.scratch``)."""
        return self.root / "staging"

    @property
    def uploads_dir(self) -> Path:
        """Files clients uploaded for a later ingest (``odfd.app.uploads``), one folder each."""
        return self.root / "uploads"

    def dataset(self, dataset_id: DatasetId) -> DatasetLayout:
        return DatasetLayout(self.datasets_dir / dataset_dir_name(dataset_id))

    def key_path(self, dataset_id: DatasetId) -> Path:
        return self.keys_dir / f"{dataset_dir_name(dataset_id)}.key"


def absolute_root(root: Path | None) -> Path:
    """The workspace folder as an absolute path: every path derived from it may be handed to a
    Spark server whose working folder is not ours (Spark Connect, cluster executors)."""
    return (Path(root) if root is not None else WorkspaceLayout.default_root()).absolute()


def existing_layout(root: Path | None) -> WorkspaceLayout:
    """The layout of the workspace ``root`` names (else ``$ODFD_HOME``, else the nearest enclosing
    one), or a ``WorkspaceError`` saying there is none and how to make one."""
    layout = WorkspaceLayout(absolute_root(root))
    if not layout.config_path.is_file():
        if root is None and not os.environ.get(WORKSPACE_ENV):
            raise WorkspaceError(
                f"no odfd workspace in {Path.cwd()} or any folder above it "
                f"(run `odfd init` to create one here, or pass --root DIR / set {WORKSPACE_ENV})"
            )
        raise WorkspaceError(f"no odfd workspace at {layout.root} (run `odfd init`)")
    return layout


def unknown_dataset_folders(datasets_dir: Path, known: Iterable[str]) -> list[Path]:
    """Folders of ``datasets_dir`` that are not among the ``known`` datasets' folder names: the
    orphans ``storage.orphans`` settles (cheap: one listing; light enough for the catalog-only
    commands to check before they answer), sorted."""
    if not datasets_dir.is_dir():
        return []
    names = set(known)
    return sorted(
        Path(entry.path)
        for entry in os.scandir(datasets_dir)
        if not entry.name.startswith(".") and entry.name not in names and entry.is_dir()
    )
