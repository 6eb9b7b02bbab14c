"""A warm `predict DIR` of the built-in classifier sends its images several to a request (the v2 API's BYTES
batch), and the server runs each request's images in one handler call even at batch size 1: the output is
the one-by-one output, byte for byte."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import httpx
import pytest
from PIL import Image

from mmsctl.archive import create_archive
from mmsctl.predict.warm_v2 import GROUP
from tests.support.cli import run_mmsctl
from tests.support.mmsctl_server import ServerInfo, running_mmsctl_server
from tests.support.paths import KITTEN_JPG, SQUEEZENET_DIR, require_shared



@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerInfo, Path, dict[str, str]]]:
    """The real SqueezeNet with the built-in handler, at MMS's default batch size 1, two workers; and the
    environment of a `predict` beside it (the server's state folder, a cache of the module's own)."""
    tmp = tmp_path_factory.mktemp("warm-batches")
    create_archive(require_shared(SQUEEZENET_DIR), model_name="squeezenet", export_path=tmp, force=True)
    _older_archive(tmp)
    with running_mmsctl_server(tmp / "srv", models={"squeezenet": str(tmp / "squeezenet.mar")}, workers=2,
                               model_store=tmp) as srv:
        yield srv, tmp / "squeezenet.mar", {"MMSCTL_STATE_DIR": str(srv.state_dir),
                                            "MMSCTL_CACHE_DIR": str(tmp / "client-cache")}


def _older_archive(tmp: Path) -> Path:
    """SqueezeNet with a copy of the built-in handler from before ``scores=npy`` (as an archive made by an
    earlier mmsctl carries it): a handler that only knows ``topk``."""
    from mmsctl.engine.builtin import VISION_HANDLER_FILE, VISION_HANDLER_MODULE

    folder = tmp / "older-src"
    folder.mkdir()
    for path in require_shared(SQUEEZENET_DIR).iterdir():
        (folder / path.name).symlink_to(path)
    source = VISION_HANDLER_FILE.read_text()
    assert 'SCORES_KEY = "scores"' in source
    (folder / f"{VISION_HANDLER_MODULE}.py").write_text(source.replace('SCORES_KEY = "scores"', 'SCORES_KEY = "-"'))
    create_archive(folder, model_name="older", handler=f"{VISION_HANDLER_MODULE}:handle", export_path=tmp, force=True)
    return tmp / "older.mar"


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """More images than one request carries: crops and flips of the kitten, JPEG and PNG."""
    folder = tmp_path_factory.mktemp("photos")
    kitten = Image.open(require_shared(KITTEN_JPG)).convert("RGB")
    w, h = kitten.size
    for i in range(GROUP + 3):
        img = kitten.crop((i * 7, i * 5, w - i * 3, h - i * 4))
        if i % 2:
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        img.save(folder / (f"{i:02d}.png" if i % 4 == 3 else f"{i:02d}.jpg"), quality=90)
    return folder


def _run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`predict` in its own process: the warm path is chosen as a process starts (mmsctl.cli.lean)."""
    return subprocess.run([sys.executable, "-m", "mmsctl", *args], capture_output=True, text=True,
                          env=dict(os.environ, **env), timeout=180)


def _local(capsys: pytest.CaptureFixture[str], *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`predict … --local` in this process (the real entry point, the same environment): an interpreter that
    imports mxnet again would cost about a CPU second a call."""
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        code, out, err = run_mmsctl(capsys, *args, "--local")
    return subprocess.CompletedProcess(["mmsctl", *args, "--local"], code, out, err)


def _infer(srv: ServerInfo, model: str, images: list[bytes], outputs: list[dict[str, object]]) -> httpx.Response:
    """A v2 infer request of *images* as one binary BYTES tensor (JSON outputs)."""
    header = json.dumps({"inputs": [{"name": "images", "datatype": "BYTES", "shape": [len(images)],
                                     "parameters": {"binary_data_size": sum(4 + len(i) for i in images)}}],
                         "outputs": outputs}).encode()
    body = b"".join([header, *(struct.pack("<I", len(i)) + i for i in images)])
    return httpx.post(f"{srv.inference_url}/v2/models/{model}/infer", content=body, timeout=60,
                      headers={"Inference-Header-Content-Length": str(len(header))})


def _batches(srv: ServerInfo) -> tuple[float, float]:
    """The server's ``mmsctl_batch_size`` histogram for the model: (requests, batches) so far."""
    text = httpx.get(f"{srv.metrics_url}/metrics", timeout=10).text
    found = {m.group(1): float(m.group(2)) for m in
             re.finditer(r'^mmsctl_batch_size_(sum|count)\{model="squeezenet"\} (\S+)$', text, re.M)}
    return found.get("sum", 0.0), found.get("count", 0.0)


@pytest.mark.slow
def test_a_folder_goes_in_batches_and_prints_what_in_process_prints(
    served: tuple[ServerInfo, Path, dict[str, str]], photos: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    srv, mar, env = served
    first = _local(capsys, "predict", str(mar), str(photos / "00.jpg"), env=env)  # extracts it in the cache
    assert first.returncode == 0, first.stderr
    for fmt, extra in (("jsonl", []), ("json", ["--top-k", "3"]), ("table", [])):
        before = _batches(srv)
        warm = _run("predict", str(mar), str(photos), "-o", fmt, "-v", *extra, env=env)
        after = _batches(srv)
        local = _local(capsys, "predict", str(mar), str(photos), "-o", fmt, *extra, env=env)
        assert warm.returncode == local.returncode == 0, (warm.stderr, local.stderr)
        assert "sent to the local server" in warm.stderr, warm.stderr
        assert warm.stdout == local.stdout, fmt
        images, batches = after[0] - before[0], after[1] - before[1]
        assert images == GROUP + 3 and batches < images, (images, batches)  # requests ran together


@pytest.mark.slow
def test_a_bad_image_in_a_batch_gives_what_in_process_gives(
    served: tuple[ServerInfo, Path, dict[str, str]], photos: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str]) -> None:
    srv, mar, env = served
    _local(capsys, "predict", str(mar), str(photos / "00.jpg"), env=env)  # as above, should this test run alone
    folder = tmp_path / "mixed"
    folder.mkdir()
    for name in ("00.jpg", "01.jpg", "03.png"):
        (folder / name).write_bytes((photos / name).read_bytes())
    (folder / "02.jpg").write_bytes(b"\xff\xd8\xff\xe0 not a JPEG after all")
    warm = _run("predict", str(mar), str(folder), "-o", "jsonl", env=env)
    local = _local(capsys, "predict", str(mar), str(folder), "-o", "jsonl", env=env)
    assert warm.returncode == local.returncode != 0
    assert warm.stdout == local.stdout and "02.jpg" in warm.stdout


def test_the_v2_api_runs_a_requests_images_in_one_call_at_batch_size_one(
        served: tuple[ServerInfo, Path, dict[str, str]]) -> None:
    """tritonclient's batch of images: one handler call (one forward pass), not one per image."""
    srv, _, _ = served
    n = GROUP + 2  # more than one call holds: cut in two
    before = _batches(srv)
    reply = _infer(srv, "squeezenet", [require_shared(KITTEN_JPG).read_bytes()] * n,
                   [{"name": "probabilities", "parameters": {"classification": 1}}])
    after = _batches(srv)
    assert reply.status_code == 200, reply.text
    (out,) = reply.json()["outputs"]
    assert out["shape"] == [n, 1] and len(set(out["data"])) == 1 and "cat" in out["data"][0]
    assert (after[0] - before[0], after[1] - before[1]) == (n, 2)


def test_an_archives_older_copy_of_the_handler_still_gives_every_class(
        served: tuple[ServerInfo, Path, dict[str, str]]) -> None:
    srv, _, _ = served
    reply = httpx.post(f"{srv.management_url}/models", params={"url": "older.mar", "initial_workers": "1",
                                                                 "synchronous": "true"}, timeout=120)
    assert reply.status_code == 200, reply.text
    answers = {}
    for model in ("squeezenet", "older"):
        got = _infer(srv, model, [require_shared(KITTEN_JPG).read_bytes()], [{"name": "probabilities"}])
        assert got.status_code == 200, got.text
        (out,) = got.json()["outputs"]
        answers[model] = (out["shape"], out["data"])
    assert answers["older"] == answers["squeezenet"] and answers["older"][0] == [1, 1000]


def _answer(header: dict[str, object], data: bytes) -> tuple[bytes, str]:
    text = json.dumps(header).encode()
    return text + data, str(len(text))


GOOD = {"outputs": [{"name": "p", "datatype": "FP32", "shape": [2, 3], "parameters": {"binary_data_size": 24}}]}


def test_the_classifiers_probabilities_are_read_a_row_per_image() -> None:
    from mmsctl.predict.warm_v2 import _probabilities

    rows = _probabilities(*_answer(GOOD, struct.pack("<6f", 0.5, 0.25, 0.25, 0, 1, 0)), 2, 3)
    assert [list(r) for r in rows] == [[0.5, 0.25, 0.25], [0.0, 1.0, 0.0]]


@pytest.mark.parametrize("body,length", [
    (b"not json", "8"),
    _answer({"outputs": [{"name": "p", "datatype": "FP32", "shape": [2, 4], "parameters": {"binary_data_size": 32}}]},
            b"\0" * 32),  # another number of classes
    _answer(GOOD, b"\0" * 23),  # fewer bytes than it says
    _answer(GOOD, b"\0" * 25),  # more
    _answer({"outputs": [{"name": "p", "datatype": "FP64", "shape": [2, 3], "parameters": {"binary_data_size": 48}}]},
            b"\0" * 48),
    _answer({"outputs": []}, b""),
    (b"{}", "-1"),
    (b"{}", None),
])
def test_an_answer_that_is_not_the_classifiers_probabilities_is_refused(body: bytes, length: str) -> None:
    from mmsctl.predict.warm_v2 import _probabilities

    with pytest.raises(OSError):
        _probabilities(body, length, 2, 3)


@pytest.mark.parametrize("text,usable,labels", [
    ("a b\nc d\n", True, ["a b", "c d"]),
    ("a\r\nb", True, ["a", "b"]),
    ("a\n\n", True, ["a", ""]),
    ("a\x0bb\n", False, None),   # one line to the handler, two to the server's v2 side
    ("", False, None),
])
def test_labels_are_read_as_the_handler_reads_them_or_not_used(tmp_path: Path, text: str, usable: bool,
                                                               labels: list[str]) -> None:
    from mmsctl.predict.warm_v2 import _labels

    path = tmp_path / "synset.txt"
    path.write_bytes(text.encode())
    got = _labels(path)
    assert got[0] is usable and (got[1] == labels if usable else True)
    assert _labels(tmp_path / "none.txt") == (True, None)


def test_on_a_terminal_the_batches_drive_the_progress_bar(
        served: tuple[ServerInfo, Path, dict[str, str]], photos: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The full CLI where stderr is a terminal: the same batches, a bar that follows their answers."""
    import io

    from rich.console import Console

    from mmsctl.cli.predict import _predict_warm
    from mmsctl.cli.render import UI
    from mmsctl.predict.inputs import expand_inputs

    srv, mar, env = served
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TERM", "xterm-256color")  # rich draws nothing live on a "dumb" one
    _local(capsys, "predict", str(mar), str(photos / "00.jpg"), env=env)  # extracted in the module's cache
    out, err = io.StringIO(), io.StringIO()
    ui = UI(out=Console(file=out, force_terminal=False, width=200), err=Console(file=err, force_terminal=True, width=100))
    before = _batches(srv)
    assert _predict_warm(ui, "jsonl", str(mar), expand_inputs([str(photos)]), top_k=None, handler=None, gpu=None,
                         verbose=False) == ""  # sent: no reason to run in-process
    after = _batches(srv)
    local = _local(capsys, "predict", str(mar), str(photos), "-o", "jsonl", env=env)
    assert out.getvalue() == local.stdout and "predict" in err.getvalue() and f"{GROUP + 3}/{GROUP + 3}" in err.getvalue()
    assert after[0] - before[0] == GROUP + 3 and after[1] - before[1] < GROUP + 3
