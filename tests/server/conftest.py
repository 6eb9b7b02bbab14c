"""One shared server per module for the API tests (starting one costs about a second)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.support.mmsctl_server import ServerInfo, make_noop_archive, running_mmsctl_server


@pytest.fixture(scope="module")
def model_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    make_noop_archive(store / "noop")
    make_noop_archive(store / "echo", name="echo")
    make_noop_archive(store / "broken", name="broken", failing=True)
    return store


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model_store: Path) -> Iterator[ServerInfo]:
    with running_mmsctl_server(
        tmp_path_factory.mktemp("srv"), model_store=model_store, models={"noop": "noop"}, workers=1,
        extra_config={"max_request_size": 100_000},
    ) as info:
        yield info
