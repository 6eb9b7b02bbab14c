"""The same archive and image in real MMS 1.1.11 and in `mmsctl predict` give the same answer.

Two archives: one made by `mmsctl archive create` (our built-in handler, which must also run
inside MMS) and one made by MMS's own `model-archiver` from MMS's unmodified example handler.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Iterator

import pytest

from tests.engine.helpers import link_checkpoint
from tests.support.cli import run_mmsctl
from tests.support.paths import KITTEN_JPG, KITTEN_PNG, SQUEEZENET_DIR, require_shared

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("mms")]

EXAMPLES = Path(__file__).resolve().parents[1] / "fixtures" / "mms_examples"


def _mmsctl_json(capsys: pytest.CaptureFixture[str], archive: Path, image: Path) -> list[dict]:
    """`mmsctl predict ARCHIVE IMAGE -o json`, in this process (the real entry point): a new interpreter
    that imports mxnet again costs about a CPU second a call."""
    code, out, err = run_mmsctl(capsys, "predict", str(archive), str(image), "-o", "json")
    assert code == 0, err
    return json.loads(out)


def _same(ours: list[dict], theirs: list[dict]) -> None:
    assert [e["class"] for e in ours] == [e["class"] for e in theirs]
    for a, b in zip(ours, theirs):
        assert abs(a["probability"] - b["probability"]) < 1e-3, (a, b)


@pytest.fixture(scope="module")
def mms(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[object, Path]]:
    from tests.support.mms import ARCHIVER_BIN, mms_skip_reason, running_mms, wait_for_prediction

    reason = mms_skip_reason()
    if reason:
        pytest.skip(reason)
    squeezenet = require_shared(SQUEEZENET_DIR)
    kitten = require_shared(KITTEN_JPG).read_bytes()
    from mmsctl.archive import create_archive

    root = tmp_path_factory.mktemp("predict-vs-mms")
    store = root / "store"
    store.mkdir()
    create_archive(squeezenet, model_name="squeezenet", export_path=store)
    example = root / "example"
    link_checkpoint(squeezenet, example)
    for f in ("model_handler.py", "mxnet_model_service.py", "mxnet_vision_service.py"):
        (example / f).write_bytes((EXAMPLES / f).read_bytes())
    (example / "mxnet_utils").mkdir()
    for f in (EXAMPLES / "mxnet_utils").glob("*.py"):
        (example / "mxnet_utils" / f.name).write_bytes(f.read_bytes())
    subprocess.run(
        [str(ARCHIVER_BIN), "--model-name", "squeezenet_v1.1", "--model-path", str(example),
         "--handler", "mxnet_vision_service:handle", "--export-path", str(store)],
        check=True, capture_output=True, timeout=120,
    )
    models = {"squeezenet": "squeezenet.mar", "example": "squeezenet_v1.1.mar"}
    with running_mms(root / "run", model_store=store, models=models) as instance:
        for name in models:
            wait_for_prediction(instance, name, kitten, timeout=120)
        yield instance, store


@pytest.mark.parametrize("model, archive", [("squeezenet", "squeezenet.mar"), ("example", "squeezenet_v1.1.mar")])
@pytest.mark.parametrize("image", [KITTEN_JPG, KITTEN_PNG], ids=["jpg", "png"])
@pytest.mark.slow
def test_same_answer_as_mms(mms: tuple, model: str, archive: str, image: Path,
                            capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.mms import predict

    instance, store = mms
    body = require_shared(image).read_bytes()
    reply = predict(instance, model, body, content_type="image/jpeg", timeout=60)
    assert reply.status == 200, reply.body[:300]
    theirs = json.loads(reply.body)
    ours = _mmsctl_json(capsys, store / archive, image)
    assert len(theirs) == 5
    _same(ours, theirs)


def test_builtin_handler_fails_only_the_bad_image_in_mms(mms: tuple) -> None:
    from tests.support.mms import predict

    instance, _ = mms
    reply = predict(instance, "squeezenet", b"definitely not an image", timeout=60)
    assert reply.status == 400
    assert json.loads(reply.body)["type"] == "BadRequestException"


def test_context_sends_inputs_to_the_server(mms: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`mmsctl --context NAME predict` gives MMS's own body for one input, and lists for several."""
    import os

    instance, store = mms
    for key in [k for k in os.environ if k.startswith("MMSCTL_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("MMSCTL_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("MMSCTL_CACHE_DIR", str(tmp_path / "cache"))
    added = run_mmsctl(capsys, "context", "add", "ref", "--inference", instance.inference_url,
                       "--management", instance.management_url)
    assert added.code == 0, added.stderr
    jpg = require_shared(KITTEN_JPG)
    one = run_mmsctl(capsys, "--context", "ref", "predict", "squeezenet", str(jpg), "-o", "json")
    assert one.code == 0, one.stderr
    _same(json.loads(one.stdout), _mmsctl_json(capsys, store / "squeezenet.mar", jpg))
    bad = tmp_path / "bad.jpg"
    bad.write_bytes(b"junk")
    many = run_mmsctl(capsys, "predict", "--context", "ref", "squeezenet", str(jpg), str(bad), "-o", "json")
    assert many.code == 4, many.stderr
    got = json.loads(many.stdout)
    assert [g["status"] for g in got] == [200, 400]
    assert "1 of 2 inputs failed" in many.stderr
