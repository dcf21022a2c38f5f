from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.server.odata_node import Served, serve


@pytest.fixture(scope="package")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    yield from serve(tmp_path_factory.mktemp("odata") / "ws")
