"""Fixtures for a real MMS / TorchServe: one of each per test process (the session fixtures ``shared_mms`` and
``shared_torchserve`` in tests/conftest.py), shared by every module in the ``mms`` xdist group, which keeps
those modules on one worker. A JVM start costs seconds of CPU.

Import the ones a module needs (pytest finds fixtures imported into the module)::

    from tests.support.fixtures_mms import mms_server  # noqa: F401

    pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("mms")]

    def test_x(mms_server):
        register_model(mms_server, "noop.mar")   # the store already holds noop.mar

``mms_server`` skips with a clear reason where MMS cannot run; its model store holds
``noop.mar`` (the echo handler) but nothing is registered, so each test registers what it
needs and unregisters it afterwards (in ``finally``: the next module sees the same server).
``torchserve_with_noop`` builds a module fixture for a differently configured
TorchServe (``yield from torchserve_with_noop(tmp_path_factory, "ts-x", metrics_mode="prometheus")``).
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest

from tests.support.mms import MmsInstance, build_noop_mar, mms_skip_reason, running_mms
from tests.support.torchserve import TorchServeInstance, build_noop_ts_mar, running_torchserve, ts_skip_reason

__all__ = ["mms_server", "one_mms", "one_torchserve", "torchserve_server", "torchserve_with_noop"]


def one_mms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MmsInstance]:
    """Body of the session fixture ``shared_mms``: MMS with ``noop.mar`` in its store, nothing registered."""
    reason = mms_skip_reason()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("mms")
    store = root / "store"
    build_noop_mar(store, "noop")
    with running_mms(root / "run", model_store=store) as mms:
        yield mms


@pytest.fixture(scope="module")
def mms_server(shared_mms: MmsInstance) -> MmsInstance:
    """This test process's one MMS (a fixture defined in a conftest is shared across modules; one imported
    into each module, as this one is, would start a server per module)."""
    return shared_mms


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


def one_torchserve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TorchServeInstance]:
    """Body of the session fixture ``shared_torchserve``: token auth on, the model API enabled, Prometheus metrics,
    ``noop`` loaded (a TorchServe start is ~6 CPU s: its JVM and a Python worker that imports torch)."""
    yield from torchserve_with_noop(tmp_path_factory, "ts", enable_model_api=True, metrics_mode="prometheus")


@pytest.fixture(scope="module")
def torchserve_server(shared_torchserve: TorchServeInstance) -> TorchServeInstance:
    """This test process's one TorchServe of that configuration (see :func:`mms_server`)."""
    return shared_torchserve
