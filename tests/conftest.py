"""Fixtures every test gets: a clean environment and private XDG folders."""

from __future__ import annotations

import gc
import os
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest

from tests.support.paths import KITTEN_JPG, KITTEN_PNG, SQUEEZENET_DIR, require_shared

if TYPE_CHECKING:
    from tests.support.moto import Moto


@pytest.fixture(autouse=True, scope="session")
def session_environ(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What module- and session-scoped fixtures see too (they run before :func:`clean_environ`):
    MXNet's default kernels, and a cache that is not the developer's (a kernel choice measured on a
    busy machine there would change the answers they compare with)."""
    saved = {key: os.environ.get(key) for key in ("MMSCTL_MKLDNN", "MMSCTL_CACHE_DIR", "MXNET_MKLDNN_ENABLED")}
    os.environ["MMSCTL_MKLDNN"] = "1"
    os.environ["MMSCTL_CACHE_DIR"] = str(tmp_path_factory.mktemp("session-cache"))
    os.environ.pop("MXNET_MKLDNN_ENABLED", None)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def homes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of every test's home (tmp_path_factory.mktemp lists its whole folder to number a new one: a
    per-test mktemp there cost ~1 CPU s per test process over a run)."""
    return tmp_path_factory.mktemp("homes")


@pytest.fixture
def tmp_path(request: pytest.FixtureRequest, homes: Path) -> Path:
    """pytest's ``tmp_path`` (a new folder named after the test, kept after the run), made in O(1): pytest's own
    lists the whole base folder to number each new one, and a test process makes hundreds."""
    return Path(tempfile.mkdtemp(prefix=re.sub(r"\W", "_", request.node.name)[:30], dir=homes.parent))


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch: pytest.MonkeyPatch, homes: Path) -> None:
    """No MMSCTL_* or AWS_* from the developer's shell; cache/config/state in a temp folder."""
    for key in list(os.environ):
        if key.startswith("MMSCTL_") and key not in ("MMSCTL_SHARED_DIR", "MMSCTL_MMS_VENV", "MMSCTL_TS_VENV"):
            monkeypatch.delenv(key, raising=False)
        if key.startswith("AWS_"):
            monkeypatch.delenv(key, raising=False)
    # boto3 must never wait on the instance-metadata service while looking for credentials.
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    home = Path(tempfile.mkdtemp(prefix="home", dir=homes))
    monkeypatch.setenv("MMSCTL_CACHE_DIR", str(home / "cache"))
    monkeypatch.setenv("MMSCTL_CONFIG_DIR", str(home / "config"))
    monkeypatch.setenv("MMSCTL_STATE_DIR", str(home / "state"))
    monkeypatch.setenv("NO_COLOR", "1")
    # Nothing in the tests may reach the internet: not the zoo, not pip building an instance's wheels (tests
    # that launch give small wheels of their own, tests/cloud/conftest.py; the boot test builds real ones once).
    monkeypatch.setenv("MMSCTL_OFFLINE", "1")
    monkeypatch.setenv("MMSCTL_WHEELHOUSE", str(home / "no-wheelhouse"))
    # MXNet's default kernels (MKL-DNN on), not a per-test measurement of each model in a fresh
    # cache (seconds each); tests/engine/test_kernels.py sets "auto" where it tests the measuring.
    monkeypatch.setenv("MMSCTL_MKLDNN", "1")
    # An in-process `predict` sets MXNet's variable for the library it loads; no later test inherits it.
    monkeypatch.delenv("MXNET_MKLDNN_ENABLED", raising=False)


@pytest.fixture(autouse=True)
def kernel_measuring_not_deferred() -> Iterator[None]:
    """A server built in this process (its ModelManager) defers kernel measurements for the whole process, as
    the server's own process should; the tests that run here after it must not inherit that (it left
    tests/engine/test_kernels.py's worker without its measurement when an in-process server test ran first)."""
    yield
    kernels = sys.modules.get("mmsctl.engine.kernels")
    if kernels is not None:
        kernels.defer_measurement(False)


@pytest.fixture
def squeezenet_dir() -> Path:
    """The real pretrained SqueezeNet v1.1 checkpoint folder in ../shared."""
    return require_shared(SQUEEZENET_DIR)


@pytest.fixture
def kitten_jpg() -> Path:
    return require_shared(KITTEN_JPG)


@pytest.fixture
def kitten_png() -> Path:
    return require_shared(KITTEN_PNG)


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    """The one moto server of this test process (tests/support/moto.py), for every package that uses AWS."""
    from tests.support.moto import moto_skip_reason, running_moto, share_client_classes, share_clients

    reason = moto_skip_reason()
    if reason:
        pytest.skip(reason)
    share_client_classes()
    share_clients()
    yield from running_moto(tmp_path_factory.mktemp("moto") / "moto.log")


@pytest.fixture
def moto(moto_server: Moto, monkeypatch: pytest.MonkeyPatch) -> Moto:
    """A fresh moto (reset before each test), with this process's boto3 pointed at it too."""
    from tests.support.moto import FAKE_AWS

    moto_server.reset()
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    for key, value in {**FAKE_AWS, "AWS_ENDPOINT_URL": moto_server.url}.items():
        monkeypatch.setenv(key, value)
    return moto_server


@pytest.fixture(scope="session")
def shared_mms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The one real MMS of this test process, behind ``mms_server`` (tests/support/fixtures_mms.py)."""
    from tests.support.fixtures_mms import one_mms

    yield from one_mms(tmp_path_factory)


@pytest.fixture(scope="session")
def shared_torchserve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The one real TorchServe of this test process, behind ``torchserve_server``."""
    from tests.support.fixtures_mms import one_torchserve

    yield from one_torchserve(tmp_path_factory)


def _unit(item: pytest.Item) -> str:
    """The unit of work xdist hands a worker (see :func:`pytest_xdist_make_scheduler`)."""
    groups = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                     for m in item.iter_markers("xdist_group")})
    return "_".join(groups) if groups else item.nodeid.split("::", 1)[0]


#: The test process's garbage collector: a full collection only after 100 of the middle generation's, each after
#: 50 of the youngest's, each after 10,000 allocations. Python's default (700, 10, 10) ran 24 full collections in
#: tests/cloud/test_fleet.py + tests/tui/test_app.py + tests/server/test_fuzz.py, 8.3 of 46.5 CPU s: each walks a
#: heap of boto3's service models, textual's and mxnet's objects. With these: 3.2 s of GC in 37.9 s, the peak
#: memory 252 MB instead of 234 (measured with gc.callbacks; docs/performance.md, "Suite time").
GC_THRESHOLDS = (10_000, 50, 100)


def pytest_configure(config: pytest.Config) -> None:
    from tests.support.shared_tls import share_default_tls

    gc.set_threshold(*GC_THRESHOLDS)
    share_default_tls()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Freeze what the test process holds before pytest's own clean-up runs five full collections over it (its
    unraisable-exception check, pytest 8.4): by then the heap is the whole run's (boto3's models, textual's and
    mxnet's objects), and those collections were ~5 CPU s per test process, at the very end of the run
    (py-spy). Every test's own unraisable exceptions were collected after it ran."""
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker, the units with the most ``slow`` tests first, then the largest: a unit of one long
    test (the boot script, the README tour) handed out last would leave the other worker idle while it runs.
    Every worker collects the same list and sorts it the same way; a unit's own order is kept."""
    if not hasattr(config, "workerinput"):
        return
    slow: Counter[str] = Counter()
    size: Counter[str] = Counter()
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        unit = _unit(item)
        size[unit] += 1
        slow[unit] += item.get_closest_marker("slow") is not None
        first.setdefault(unit, index)
    items.sort(key=lambda item: (-slow[_unit(item)], -size[_unit(item)], first[_unit(item)]))


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """``--dist loadgroup`` with each module as one unit unless its tests name an ``xdist_group`` (as
    ``--dist loadfile`` would do): a module's tests then run in one worker, so its module-scoped fixtures (a
    server, the photo corpus, a fuzzed API) are built once, not once in each worker its tests land in. Units
    go out in the order the workers collected them (:func:`pytest_collection_modifyitems`)."""
    from xdist.scheduler import LoadGroupScheduling

    class ModuleOrGroup(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):
                return nodeid.split("@")[-1]
            return nodeid.split("::", 1)[0]

    if config.getvalue("dist") != "loadgroup":
        return None
    config.option.loadscopereorder = False
    return ModuleOrGroup(config, log)
