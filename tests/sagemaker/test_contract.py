"""SageMaker's container contract, tested for real: the image's ``serve`` entry as its own process with SageMaker's
environment, real photos through ``/invocations``, ``/ping`` before and after the model is ready, SIGTERM with
requests in flight.

One container serves the real SqueezeNet for the module: ``mmsctl sagemaker run-local MODEL --build CTX`` packs
the archive as ``model.tar.gz``, extracts it as SageMaker does (the folder made read-only here, as a mount may
be) and runs the build context's ``entrypoint.sh serve`` (the image's ENTRYPOINT) with SageMaker's environment.
Inside it, and in its workers, only the image's hash-locked distributions can be imported (a finder installed
by ``sitecustomize``, active where ``MMSCTL_SAGEMAKER_MODEL_DIR`` is set: the container's environment), so the
lock is shown to hold what ``serve`` imports. A second, model-less container (a gated echo handler) shows the
lifecycle. The runtime API in front of the first (:mod:`tests.support.sagemaker_runtime`) lets ``sagemaker
invoke``, ``predict --context sagemaker:NAME`` and ``bench --context sagemaker:NAME`` meet the real model.
docs/sagemaker.md's run-local block and its contexts block run here as the page shows them.
"""

from __future__ import annotations

import io
import json
import os
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import httpx
import numpy as np
import psutil
import pytest

from mmsctl.cloud.lambda_.build import LOCK_FILE
from tests.recipes.doc_examples import block_at, without_comment
from tests.lambda_.conftest import squeezenet_archive  # noqa: F401 - the fixture
from tests.support._proc import free_port
from tests.support.cli import run_here
from tests.support.http_mirror import serving_folder
from tests.support.mmsctl_server import make_handler_archive
from tests.support.paths import KITTEN_JPG, KITTEN_PNG, REPO, SQUEEZENET_DIR, require_shared
from tests.support.signals import popen
from tests.support.waiting import wait_until

MODEL = "squeezenet_v1.1"
#: Imports the image may lack and that are optional where they happen (httpx's extras, mxnet's ONNX export, yarl's
#: pydantic support, aiohttp's brotli): tried and skipped.
OPTIONAL = {"brotli", "brotlicffi", "onnx", "pydantic_core", "h2", "socksio", "zstandard", "click", "pygments", "rich"}

#: Only the lock importable, in the container's processes (see the module docstring).
_SITECUSTOMIZE = r'''
import importlib.abc, importlib.metadata as md, importlib.util, os, re, sys
if os.environ.get("MMSCTL_SAGEMAKER_MODEL_DIR") and os.environ.get("ONLY_THE_LOCK"):
    _locked = set(re.findall(r"^([a-z0-9-]+)==", open(os.environ["ONLY_THE_LOCK"]).read(), re.M))
    _dists = md.packages_distributions()
    _log = os.environ["ONLY_THE_LOCK_LOG"]

    def _blocked(name):
        top = name.split(".")[0]
        owners = {d.lower().replace("_", "-") for d in _dists.get(top, [])} - {"mmsctl"}
        if owners and not owners & _locked and top not in sys.stdlib_module_names:
            with open(_log, "a") as fh:
                fh.write(top + "\n")
            return True
        return False

    class OnlyTheLock(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if _blocked(name):
                raise ModuleNotFoundError("No module named %r (not in the image)" % name, name=name)
            return None

    _find_spec = importlib.util.find_spec
    importlib.util.find_spec = lambda name, package=None: None if _blocked(name) else _find_spec(name, package)
    sys.meta_path.insert(0, OnlyTheLock())
'''

#: A handler that stands still where the lifecycle test needs it: its import waits for GATE_DIR/ready (the
#: model is loading), each request marks GATE_DIR/entered-* and waits for GATE_DIR/release.
_GATED = r'''
import os, time, uuid
GATE = os.environ["GATE_DIR"]


def _wait(name):
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(GATE, name)):
        if time.monotonic() > deadline:
            raise RuntimeError("gate %s never opened" % name)
        time.sleep(0.02)


_wait("ready")


def handle(data, context):
    if data is None:
        return None
    out = []
    for row in data:
        open(os.path.join(GATE, "entered-" + uuid.uuid4().hex), "w").close()
        _wait("release")
        body = row.get("body") or b""
        out.append(body.decode() if isinstance(body, (bytes, bytearray)) else body)
    return out
'''


#: A handler that sleeps for the seconds its request's body says, once it marked GATE_DIR/entered-SECONDS.
_SLEEPER = r'''
import os, time
GATE = os.environ["GATE_DIR"]


def handle(data, context):
    if data is None:
        return None
    out = []
    for row in data:
        body = row.get("body") or b"0"
        seconds = body.decode() if isinstance(body, (bytes, bytearray)) else str(body)
        open(os.path.join(GATE, "entered-" + seconds), "w").close()
        time.sleep(float(seconds))
        out.append(seconds)
    return out
'''


@dataclass
class Container:
    url: str
    runner: "subprocess.Popen[bytes]"
    output: Path
    blocked_log: Path


def _ping(url: str) -> Any:
    """``GET /ping``'s answer, or None while nothing listens."""
    try:
        return httpx.get(f"{url}/ping", timeout=2)
    except httpx.TransportError:
        return None


@pytest.fixture(scope="module")
def container(squeezenet_archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:  # noqa: F811
    work = tmp_path_factory.mktemp("sagemaker")
    build = run_here("lambda", "build", str(squeezenet_archive), "--out", str(work / "ctx"), cwd=REPO)
    assert build.returncode == 0, build.stderr
    site = work / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    port, output, blocked = free_port(), work / "run-local.out", work / "blocked.log"
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{REPO}", "ONLY_THE_LOCK": str(LOCK_FILE),
           "ONLY_THE_LOCK_LOG": str(blocked), "MMSCTL_STATE_DIR": str(work / "state")}
    with open(output, "wb") as fh:
        runner = popen([sys.executable, "-m", "mmsctl", "sagemaker", "run-local", str(squeezenet_archive),
                        "--build", str(work / "ctx"), "--port", str(port), "--workers", "1"],
                       stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=work)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: (_ping(url) or httpx.Response(0)).status_code == 200, timeout=180,
                   what="the container's /ping answering 200", interval=0.2,
                   alive=lambda: None if runner.poll() is None else output.read_text(errors="replace")[-3000:])
        yield Container(url, runner, output, blocked)
    finally:
        if runner.poll() is None:
            runner.send_signal(signal.SIGINT)
            try:
                runner.wait(60)
            except subprocess.TimeoutExpired:
                runner.kill()
                runner.wait(10)


def _serve_process(container: Container) -> psutil.Process:
    """The container's server: the ``python -m mmsctl.sagemaker serve`` run-local started."""
    for child in psutil.Process(container.runner.pid).children(recursive=True):
        if "mmsctl.sagemaker" in child.cmdline():
            return child
    raise AssertionError("no serve process under run-local")


def _post(url: str, body: bytes, **headers: str) -> httpx.Response:
    return httpx.post(url, content=body, headers=headers, timeout=60)


def test_a_real_photo_through_invocations_answers_as_predictions_does(container: Container) -> None:
    kitten = require_shared(KITTEN_JPG).read_bytes()
    lean = _post(f"{container.url}/invocations", kitten, **{"Content-Type": "image/jpeg"})
    full = _post(f"{container.url}/invocations?model_name={MODEL}", kitten, **{"Content-Type": "image/jpeg"})
    predictions = _post(f"{container.url}/predictions/{MODEL}", kitten, **{"Content-Type": "image/jpeg"})
    assert lean.status_code == 200 and lean.headers["content-type"].startswith("application/json")
    assert lean.content == full.content == predictions.content  # the lean path, the full path, /predictions
    top = lean.json()
    assert len(top) == 5 and top == sorted(top, key=lambda r: -r["probability"])
    ping = httpx.get(f"{container.url}/ping", timeout=2)
    assert (ping.status_code, ping.json()) == (200, {"status": "Healthy"})


def test_a_phone_photo_and_a_png(container: Container, tmp_path: Path) -> None:
    """A 12 MP JPEG as phones write them (3-4 MB, under InvokeEndpoint's 6 MB) and a PNG of the same kitten."""
    from tests.support.photos import make_master

    phone = tmp_path / "phone.jpg"
    make_master().save(phone, quality=92)
    assert 2_000_000 < phone.stat().st_size < 6_000_000
    big = _post(f"{container.url}/invocations", phone.read_bytes(), **{"Content-Type": "image/jpeg"})
    png = _post(f"{container.url}/invocations", require_shared(KITTEN_PNG).read_bytes(), **{"Content-Type": "image/png"})
    assert big.status_code == png.status_code == 200
    assert big.json()[0]["class"] == png.json()[0]["class"]  # the same kitten, upscaled


def test_accept_picks_every_class_score_as_npy_or_is_refused(container: Container) -> None:
    kitten = require_shared(KITTEN_JPG).read_bytes()
    top = _post(f"{container.url}/invocations", kitten, **{"Content-Type": "image/jpeg"}).json()
    npy = _post(f"{container.url}/invocations", kitten, **{"Content-Type": "image/jpeg",
                                                             "Accept": "application/x-npy"})
    assert npy.status_code == 200 and npy.headers["content-type"] == "application/x-npy"
    scores = np.load(io.BytesIO(npy.content), allow_pickle=False)
    labels = (require_shared(SQUEEZENET_DIR) / "synset.txt").read_text().splitlines()
    assert scores.shape == (len(labels),) and scores.dtype == np.float32
    assert labels[int(np.argmax(scores))] == top[0]["class"]
    assert float(scores.max()) == pytest.approx(top[0]["probability"], rel=1e-6)
    csv = _post(f"{container.url}/invocations", kitten, **{"Content-Type": "image/jpeg", "Accept": "text/csv"})
    assert csv.status_code == 406 and csv.json()["type"] == "NotAcceptableException"
    either = _post(f"{container.url}/invocations", kitten, **{"Content-Type": "image/jpeg",
                                                               "Accept": "text/csv, application/json;q=0.5"})
    assert either.status_code == 200 and either.json() == top


def test_an_npy_tensor_a_v2_body_and_custom_attributes(container: Container) -> None:
    from PIL import Image

    png = require_shared(KITTEN_PNG).read_bytes()
    top = _post(f"{container.url}/invocations", png, **{"Content-Type": "image/png"}).json()
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))  # 224x224x3, the handler's HxWxC tensor
    out = io.BytesIO()
    np.save(out, pixels, allow_pickle=False)
    tensor = _post(f"{container.url}/invocations", out.getvalue(), **{"Content-Type": "application/x-npy"})
    assert tensor.status_code == 200 and tensor.json()[0]["class"] == top[0]["class"]
    header = json.dumps({"inputs": [{"name": "data_0", "datatype": "BYTES", "shape": [1],
                                     "parameters": {"binary_data_size": len(png) + 4}}],
                         "outputs": [{"name": "probabilities", "parameters": {"classification": 3}}]}).encode()
    v2 = _post(f"{container.url}/invocations", header + struct.pack("<I", len(png)) + png,
               **{"Content-Type": "application/octet-stream", "Inference-Header-Content-Length": str(len(header))})
    assert v2.status_code == 200
    assert v2.json()["outputs"][0]["data"][0].endswith(":" + top[0]["class"])
    two = _post(f"{container.url}/invocations", png, **{"Content-Type": "image/png",
                                                         "X-Amzn-SageMaker-Custom-Attributes": "topk=2"})
    assert two.json() == top[:2]


def test_bad_bodies_get_the_same_answer_on_both_paths(container: Container) -> None:
    """A v2 body the codec refuses: the protocol's error, from the lean path and the full one alike; a JSON body
    in MMS's form reaches the model as on /predictions (which refuses it: not an image)."""
    bad_v2 = b'{"inputs": 3}'
    lean = _post(f"{container.url}/invocations", bad_v2, **{"Content-Type": "application/json"})
    full = _post(f"{container.url}/invocations?model_name={MODEL}", bad_v2, **{"Content-Type": "application/json"})
    assert (lean.status_code, lean.json()) == (full.status_code, full.json())
    assert lean.status_code == 400 and set(lean.json()) == {"error"}
    mms = _post(f"{container.url}/invocations", b'{"data": [1, 2]}', **{"Content-Type": "application/json"})
    same = _post(f"{container.url}/predictions/{MODEL}", b'{"data": [1, 2]}', **{"Content-Type": "application/json"})
    assert (mms.status_code, mms.content) == (same.status_code, same.content) and mms.status_code == 400


def test_only_the_inference_port_listens_and_the_image_lock_holds_what_serve_imports(container: Container) -> None:
    serve = _serve_process(container)
    environ = serve.environ()
    port = int(container.url.rsplit(":", 1)[1])
    assert environ["SAGEMAKER_BIND_TO_PORT"] == str(port)
    assert Path(environ["MMSCTL_SAGEMAKER_MODEL_DIR"]).parts[-3:] == ("opt", "ml", "model")
    assert (Path(environ["MMSCTL_SAGEMAKER_MODEL_DIR"]) / MODEL / "MAR-INF" / "MANIFEST.json").is_file()
    assert serve.cmdline()[-3:] == ["-m", "mmsctl.sagemaker", "serve"]  # entrypoint.sh's exec
    listening = {(c.laddr.ip, c.laddr.port) for p in [serve, *serve.children(recursive=True)]
                 for c in p.connections("tcp") if c.status == psutil.CONN_LISTEN}
    assert listening == {("127.0.0.1", port)}  # no management or metrics API
    blocked = set(container.blocked_log.read_text().split()) if container.blocked_log.exists() else set()
    assert "onnx" in blocked  # the finder ran in the worker, where mxnet probes its ONNX export
    assert blocked <= OPTIONAL, f"serve imports what the image does not install: {sorted(blocked - OPTIONAL)}"


@pytest.fixture
def runtime(container: Container, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The runtime API in front of the container, endpoint "kitten", and this process's AWS settings for it."""
    from tests.support.moto import FAKE_AWS
    from tests.support.sagemaker_runtime import serving_runtime

    with serving_runtime({"kitten": container.url}, access_key=FAKE_AWS["AWS_ACCESS_KEY_ID"],
                         secret=FAKE_AWS["AWS_SECRET_ACCESS_KEY"], token=FAKE_AWS["AWS_SESSION_TOKEN"]) as served:
        for key, value in {**FAKE_AWS, "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": served.url}.items():
            monkeypatch.setenv(key, value)
        yield served


def test_invoke_and_predict_through_the_runtime_api(runtime: Any, tmp_path: Path) -> None:
    kitten = require_shared(KITTEN_JPG)
    invoked = run_here("sagemaker", "invoke", "kitten", str(kitten), "-o", "json")
    assert invoked.returncode == 0, invoked.stderr
    answer = json.loads(invoked.stdout)
    assert answer["variant"] == "AllTraffic" and len(answer["result"]) == 5
    predicted = run_here("predict", MODEL, str(kitten), "--context", "sagemaker:kitten", "-o", "json")
    assert predicted.returncode == 0, predicted.stderr
    assert json.loads(predicted.stdout)[0]["class"] == answer["result"][0]["class"]
    (tmp_path / "note.txt").write_text("not an image")
    refused = run_here("sagemaker", "invoke", "kitten", str(tmp_path / "note.txt"))
    assert refused.returncode == 8 and "kitten: the model answered 400:" in refused.stderr, refused.stderr
    assert "/aws/sagemaker/Endpoints/kitten" in refused.stderr
    missing = run_here("sagemaker", "invoke", "other", str(kitten))
    assert missing.returncode == 3 and "no endpoint other" in missing.stderr
    assert runtime.refused == [] and runtime.forwarded.count("kitten") == 3


def test_the_context_examples_run_as_pasted(moto: Any, runtime: Any, tmp_path: Path) -> None:
    """docs/sagemaker.md's contexts block, each line as written, in a folder holding kitten.jpg: predict and bench
    through the runtime API (bench pre-signs InvokeEndpoint's requests, SigV4 checked by the stand-in, and
    replays them), top from moto's DescribeEndpoint and CloudWatch; the endpoint is moto's, InService."""
    import boto3

    (block,) = block_at("docs/sagemaker.md", "test_the_context_examples_run_as_pasted")
    shutil.copy(require_shared(KITTEN_JPG), tmp_path / "kitten.jpg")
    sm = boto3.client("sagemaker")
    sm.create_model(ModelName="m", PrimaryContainer={"Image": "x"}, ExecutionRoleArn="arn:aws:iam::123456789012:role/r")
    sm.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[
        {"VariantName": "AllTraffic", "ModelName": "m", "InstanceType": "ml.m5.large", "InitialInstanceCount": 1}])
    sm.create_endpoint(EndpointName="kitten", EndpointConfigName="c")
    said = []
    for line in block.commands:
        words = shlex.split(without_comment(line))
        assert words[0] == "mmsctl" and "--context" in words, line
        done = run_here(*words[1:], cwd=tmp_path)
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
        said.append(done.stdout)
    predicted, benched, top = said
    assert "cat" in predicted.splitlines()[1]  # the first row of the table: the real model's top class
    levels = {row.split()[0]: row.split() for row in benched.splitlines()[1:3]}  # LEVEL SENT OK … ERRORS
    assert set(levels) == {"1", "4"}, benched
    assert all(row[1] == row[2] != "0" and row[-1] == "-" for row in levels.values()), benched  # every one answered
    assert top.splitlines()[1].split()[:3] == ["m", "AllTraffic", "1/1"], top  # the variant, its instance ready
    assert runtime.refused == [] and runtime.forwarded.count("kitten") >= len(levels) + 1


def test_run_local_and_curl_as_the_page_shows_them(squeezenet_archive: Path, tmp_path: Path) -> None:  # noqa: F811
    """docs/sagemaker.md's run-local block as pasted (only the port is this test's), squeezenet from a zoo mirror on
    loopback: run-local says the page's line once /ping answers, and the page's curl gets the top-5."""
    (block,) = block_at("docs/sagemaker.md", "test_run_local_and_curl_as_the_page_shows_them")
    run_line, curl_line = (without_comment(c) for c in block.commands)
    page = (REPO / "docs" / "sagemaker.md").read_text(encoding="utf-8")
    (shown,) = [line for line in page.splitlines() if line.startswith("serving squeezenet as SageMaker would")]
    mirror, work, port = tmp_path / "zoo", tmp_path / "work", free_port()
    mirror.mkdir()
    work.mkdir()
    shutil.copy(squeezenet_archive, mirror / "squeezenet_v1.1.mar")
    shutil.copy(require_shared(KITTEN_JPG), work / "kitten.jpg")
    said = tmp_path / "run-local.out"
    with serving_folder(mirror) as zoo:
        env = {**os.environ, "PYTHONPATH": str(REPO), "MMSCTL_ZOO_URL": zoo.url, "MMSCTL_OFFLINE": "0",
               "SAGEMAKER_MODEL_SERVER_WORKERS": "1"}
        words = shlex.split(run_line.replace("--port 8080", f"--port {port}"))
        with open(said, "wb") as fh:
            runner = popen([sys.executable, "-m", "mmsctl", *words[1:]], stdout=fh, stderr=subprocess.STDOUT,
                           env=env, cwd=work)
        try:
            _curl_as_the_page_shows(runner, said, shown, curl_line, port, work)
        finally:
            if runner.poll() is None:
                runner.kill()
                runner.wait(10)


def _curl_as_the_page_shows(runner: "subprocess.Popen[bytes]", said: Path, shown: str, curl_line: str, port: int,
                            work: Path) -> None:
    wait_until(lambda: shown.split(" at ")[0] in said.read_text(errors="replace"), timeout=180,
               what="run-local saying it serves", interval=0.2,
               alive=lambda: None if runner.poll() is None else said.read_text(errors="replace")[-3000:])
    assert shown.replace(":8080", f":{port}") in said.read_text().splitlines()
    curl = subprocess.run(["bash", "-c", curl_line.replace("127.0.0.1:8080", f"127.0.0.1:{port}")], cwd=work,
                          capture_output=True, text=True, timeout=60)
    top = json.loads(curl.stdout)
    assert len(top) == 5 and "cat" in top[0]["class"], curl.stdout + curl.stderr
    runner.send_signal(signal.SIGINT)
    assert runner.wait(60) == 0


def test_ping_before_and_after_the_model_is_ready_then_sigterm_answers_every_request_in_flight(tmp_path: Path) -> None:
    """A model still loading: /ping 503 Unhealthy. Ready: 200. SIGTERM with three requests in the model: /ping 503
    Draining, a new request 503, and each of the three answered before the process exits 0."""
    gate, port = tmp_path / "gate", free_port()
    gate.mkdir()
    model = make_handler_archive(tmp_path / "model" / "echo", _GATED, "echo")
    env = {**os.environ, "PYTHONPATH": str(REPO), "GATE_DIR": str(gate), "SAGEMAKER_BIND_TO_PORT": str(port),
           "MMSCTL_SAGEMAKER_HOST": "127.0.0.1", "MMSCTL_SAGEMAKER_MODEL_DIR": str(model.parent),
           "SAGEMAKER_MODEL_SERVER_WORKERS": "3", "MMSCTL_STATE_DIR": str(tmp_path / "state")}
    with open(tmp_path / "serve.out", "wb") as fh:
        serve = popen([sys.executable, "-m", "mmsctl.sagemaker", "serve"], stdout=fh, stderr=subprocess.STDOUT,
                      env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        _lifecycle(serve, url, gate, tmp_path / "serve.out")
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(10)


def _lifecycle(serve: "subprocess.Popen[bytes]", url: str, gate: Path, output: Path) -> None:
    alive = lambda: None if serve.poll() is None else output.read_text(errors="replace")[-2000:]  # noqa: E731
    first = wait_until(lambda: _ping(url), timeout=60, what="the port listening", alive=alive)
    assert (first.status_code, first.json()) == (503, {"status": "Unhealthy"})  # the model is loading
    (gate / "ready").touch()
    wait_until(lambda: _ping(url).status_code == 200, timeout=60, what="/ping 200", alive=alive)
    answers: dict[int, httpx.Response] = {}

    def send(i: int) -> None:
        answers[i] = httpx.post(f"{url}/invocations", content=f"request {i}".encode(), timeout=60)

    threads = [threading.Thread(target=send, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(list(gate.glob("entered-*"))) == 3, timeout=60, what="three requests in the model",
               alive=alive)
    serve.send_signal(signal.SIGTERM)
    draining = wait_until(lambda: (r := httpx.get(f"{url}/ping", timeout=2)).status_code == 503 and r,
                          timeout=30, what="/ping answering 503 while draining")
    assert draining.json() == {"status": "Draining"}
    late = httpx.post(f"{url}/invocations", content=b"late", timeout=10)
    assert late.status_code == 503 and late.headers["retry-after"] == "1"
    (gate / "release").touch()
    for thread in threads:
        thread.join(60)
    assert {i: (r.status_code, r.text) for i, r in answers.items()} == {i: (200, f"request {i}") for i in range(3)}
    assert serve.wait(30) == 0


def test_sigterm_answers_a_request_longer_than_the_drain_503_and_exits_before_sigkill(tmp_path: Path) -> None:
    """A 6 s drain (``MMSCTL_SAGEMAKER_DRAIN_TIMEOUT``) stands for SageMaker's 25 s, SIGKILL 5 s after its end as at
    30 s. SIGTERM while one request needs 600 s and another 1 s: the short one is answered 200, the long one 503
    with MMS's error body (an answer, not a reset), and the process exits 0 before SIGKILL would have come (a
    drain that gives busy workers a second budget of their own ends past it)."""
    gate, port, drain = tmp_path / "gate", free_port(), 6
    gate.mkdir()
    model = make_handler_archive(tmp_path / "model" / "sleeper", _SLEEPER, "sleeper")
    env = {**os.environ, "PYTHONPATH": str(REPO), "GATE_DIR": str(gate), "SAGEMAKER_BIND_TO_PORT": str(port),
           "MMSCTL_SAGEMAKER_HOST": "127.0.0.1", "MMSCTL_SAGEMAKER_MODEL_DIR": str(model.parent),
           "SAGEMAKER_MODEL_SERVER_WORKERS": "2", "MMSCTL_SAGEMAKER_DRAIN_TIMEOUT": str(drain),
           "MMSCTL_STATE_DIR": str(tmp_path / "state")}
    output = tmp_path / "serve.out"
    with open(output, "wb") as fh:
        serve = popen([sys.executable, "-m", "mmsctl.sagemaker", "serve"], stdout=fh, stderr=subprocess.STDOUT,
                      env=env)
    alive = lambda: None if serve.poll() is None else output.read_text(errors="replace")[-2000:]  # noqa: E731
    answers: dict[str, Any] = {}

    def send(seconds: str) -> None:
        try:
            answers[seconds] = httpx.post(f"http://127.0.0.1:{port}/invocations", content=seconds.encode(),
                                          timeout=120)
        except httpx.TransportError as exc:  # a reset: what SIGKILL mid-request gives the client
            answers[seconds] = exc

    threads = [threading.Thread(target=send, args=(seconds,)) for seconds in ("600", "1")]
    try:
        wait_until(lambda: (_ping(f"http://127.0.0.1:{port}") or httpx.Response(0)).status_code == 200,
                   timeout=60, what="/ping 200", alive=alive)
        for thread in threads:
            thread.start()
        wait_until(lambda: {p.name for p in gate.glob("entered-*")} == {"entered-600", "entered-1"}, timeout=60,
                   what="both requests in the model", alive=alive)
        serve.send_signal(signal.SIGTERM)
        assert serve.wait(drain + 5) == 0, output.read_text(errors="replace")[-2000:]  # before SIGKILL's time
        for thread in threads:
            thread.join(30)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(10)
    short, long = answers["1"], answers["600"]
    assert isinstance(short, httpx.Response) and (short.status_code, short.text) == (200, "1")
    assert isinstance(long, httpx.Response), f"the long request got no answer: {long!r}"
    assert long.status_code == 503 and long.json()["type"] == "ServiceUnavailableException"
    assert long.json()["message"].startswith("The server is shutting down"), long.text


def test_ctrl_c_stops_the_container_as_sagemaker_does(container: Container) -> None:
    """run-local's Ctrl+C: SIGTERM to the container (it drains and exits 0), and run-local exits 0 after it."""
    serve = _serve_process(container)
    container.runner.send_signal(signal.SIGINT)
    assert container.runner.wait(60) == 0
    assert not serve.is_running() or serve.status() == psutil.STATUS_ZOMBIE
    said = container.output.read_text(errors="replace")
    assert "as SageMaker would, at http://127.0.0.1:" in said
    assert "shutting down: draining for up to 25 s" in said
