"""Archives that import MMS's ``mms`` package run without MMS installed (mmsctl.engine.mms_compat).

Each test runs with this process's import state saved and restored: the compatibility package, once on
the import path, stays there for the process (as in a worker), and no later test may find it.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Iterator

import pytest

from mmsctl.engine.mms_compat import FOLDER, imports_mms, provide_mms
from mmsctl.engine.spec import ServiceSpec
from mmsctl.errors import HandlerError
from tests.engine.helpers import body_item, link_checkpoint, load
from tests.support.mms_suite import MODELS


def _drop_mms() -> None:
    for name in [m for m in sys.modules if m == "mms" or m.startswith("mms.")]:
        del sys.modules[name]


@pytest.fixture(autouse=True)
def own_import_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No ``mms`` before the test (the one of .venv-mms is never on this path) and none after it."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(FOLDER)])
    _drop_mms()
    yield
    _drop_mms()


def _model(tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(MODELS / name, tmp_path / name))


def test_a_legacy_0x_service_runs_on_mmsctls_own_service_classes(tmp_path: Path) -> None:
    root = _model(tmp_path, "noop-v0.1")
    service = load(ServiceSpec(root, "noop_v0.1", "noop_service.py", legacy=True))
    [answer] = service.handle([body_item("1", b"data=test", "application/x-www-form-urlencoded")])
    assert (answer.status, answer.body) == (200, b"OK")
    assert Path(sys.modules["mms"].__file__).parent == FOLDER / "mms"  # ours, not an installed one


def test_a_handler_raising_mms_prediction_exception_gets_its_status(tmp_path: Path) -> None:
    root = _model(tmp_path, "custom-return-code")
    [answer] = load(ServiceSpec(root, "crc", "service:handle")).handle([body_item("1", b"x")])
    assert answer.status == 599 and json.loads(answer.body)["message"] == "Some Prediction Error"


def test_an_installed_mms_is_never_shadowed(tmp_path: Path) -> None:
    installed = tmp_path / "site"
    (installed / "mms").mkdir(parents=True)
    (installed / "mms" / "__init__.py").write_text("INSTALLED = True\n")
    sys.path.insert(0, str(installed))
    root = _model(tmp_path, "noop-v0.1")
    assert provide_mms(root, legacy=True) is False
    assert str(FOLDER) not in sys.path
    import mms

    assert getattr(mms, "INSTALLED", False)


def test_only_a_model_whose_code_imports_mms_gets_it(tmp_path: Path) -> None:
    plain = _model(tmp_path, "noop-v1.0")
    assert not imports_mms(plain) and provide_mms(plain, legacy=False) is False
    assert str(FOLDER) not in sys.path
    helper = _model(tmp_path, "custom-return-code")
    (helper / "service.py").rename(helper / "helper.py")  # the import is in a module the handler imports
    (helper / "service.py").write_text("from helper import handle\n")
    assert imports_mms(helper) and provide_mms(helper, legacy=False) is True
    assert sys.path[-1] == str(FOLDER)  # last: anything installed later still wins
    assert imports_mms(plain, handler_file=helper / "helper.py")  # a --handler file from elsewhere counts too


def test_a_module_of_mms_that_mmsctl_does_not_provide_is_named(tmp_path: Path) -> None:
    root = _model(tmp_path, "noop-v0.1")
    (root / "noop_service.py").write_text("from mms.arg_parser import ArgParser\n")
    with pytest.raises(HandlerError) as info:
        load(ServiceSpec(root, "noop_v0.1", "noop_service.py", legacy=True))
    assert "mms.arg_parser" in info.value.message and "multi-model-server==1.1.11" in (info.value.hint or "")


def test_a_legacy_vision_service_classifies_as_the_builtin_handler(
    tmp_path: Path, squeezenet_dir: Path, kitten_jpg: Path
) -> None:
    """MMS 0.x's MXNetVisionService, on mmsctl's own classes: the built-in handler's top 5."""
    root = tmp_path / "legacy"
    link_checkpoint(squeezenet_dir, root)
    (root / "signature.json").unlink()
    (root / "signature.json").write_text(json.dumps({
        "input_type": "image/jpeg", "output_type": "application/json",
        "inputs": [{"data_name": "data_0", "data_shape": [0, 3, 224, 224]}],
    }))
    (root / "MANIFEST.json").write_text(json.dumps({"Model": {
        "Model-Name": "squeezenet_v1.1", "Service": "squeezenet_service.py", "Signature": "signature.json",
        "Symbol": "squeezenet_v1.1-symbol.json", "Parameters": "squeezenet_v1.1-0000.params"}}))
    (root / "squeezenet_service.py").write_text(
        "from mms.model_service.mxnet_vision_service import MXNetVisionService\n\n\n"
        "class SqueezenetService(MXNetVisionService):\n    pass\n")
    legacy = load(ServiceSpec(root, "squeezenet_v1.1", "squeezenet_service.py", legacy=True))
    builtin = load(ServiceSpec(squeezenet_dir, "squeezenet"))
    body = kitten_jpg.read_bytes()
    got = json.loads(legacy.handle([body_item("1", body, "image/jpeg")])[0].body)
    want = json.loads(builtin.handle([body_item("1", body, "image/jpeg")])[0].body)
    assert [e["class"] for e in got] == [e["class"] for e in want]
    assert all(abs(a["probability"] - b["probability"]) < 1e-6 for a, b in zip(got, want))
