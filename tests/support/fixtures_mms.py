"""Module-scoped fixtures for a real MMS / TorchServe: one server per test module.

Import the ones a module needs (pytest finds fixtures imported into the module)::

    from tests.support.fixtures_mms import mms_server  # noqa: F401

    pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("mms")]

    def test_x(mms_server):
        register_model(mms_server, "noop.mar")   # the store already holds noop.mar

``mms_server`` skips the module with a clear reason where MMS cannot run; its
model store holds ``noop.mar`` (the echo handler) but nothing is registered, so
each test registers what it needs and unregisters it afterwards.
``torchserve_with_noop`` builds a module fixture for a differently configured
TorchServe (``yield from torchserve_with_noop(tmp_path_factory, "ts-x", metrics_mode="prometheus")``).
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from tests.support.mms import MmsInstance, build_noop_mar, mms_skip_reason, running_mms
from tests.support.torchserve import TorchServeInstance, build_noop_ts_mar, running_torchserve, ts_skip_reason

__all__ = ["mms_server", "torchserve_server", "torchserve_with_noop"]


@pytest.fixture(scope="module")
def mms_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MmsInstance]:
    reason = mms_skip_reason()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("mms")
    store = root / "store"
    build_noop_mar(store, "noop")
    with running_mms(root / "run", model_store=store) as mms:
        yield mms


def torchserve_with_noop(
    tmp_path_factory: pytest.TempPathFactory, folder: str, **options: Any
) -> Iterator[TorchServeInstance]:
    """Body of a module fixture: TorchServe with ``noop`` (the echo handler) loaded.

    Skips where TorchServe cannot run; *options* go to :func:`running_torchserve`.
    """
    reason = ts_skip_reason()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp(folder)
    store = root / "store"
    build_noop_ts_mar(store, "noop")
    with running_torchserve(root / "run", model_store=store, models={"noop": "noop.mar"}, **options) as ts:
        yield ts


@pytest.fixture(scope="module")
def torchserve_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TorchServeInstance]:
    """TorchServe with token auth on, the model API enabled and ``noop`` loaded."""
    yield from torchserve_with_noop(tmp_path_factory, "ts", enable_model_api=True)
