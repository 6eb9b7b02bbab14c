"""Clients no one here wrote drive ``mmsctl serve``'s v2 API: Triton's ``tritonclient.http`` and KServe's
``InferenceRESTClient`` (health, metadata, JSON and binary infer), and the top 5 they get for the kitten is
what the MMS API answers for it."""

from __future__ import annotations

import asyncio
from typing import Iterator

import httpx
import numpy as np
import pytest

from tests.support.mmsctl_server import ServerInfo, echo_and_squeezenet_server
from tests.support.paths import KITTEN_JPG, SQUEEZENET_DIR, require_shared

tritonclient_http = pytest.importorskip("tritonclient.http", reason="tritonclient[http] is not installed")
# kserve (and the pandas it pulls in) is imported by its one test only: importing it here would cost every
# test process that collects this module a second and a half.


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    with echo_and_squeezenet_server(tmp_path_factory) as info:
        yield info


@pytest.fixture(scope="module")
def mms_top5(srv: ServerInfo) -> list[str]:
    kitten = require_shared(KITTEN_JPG).read_bytes()
    answer = httpx.post(f"{srv.inference_url}/predictions/squeezenet", content=kitten, timeout=60)
    assert answer.status_code == 200, answer.text
    return [row["class"] for row in answer.json()]


def _triton(srv: ServerInfo) -> "tritonclient_http.InferenceServerClient":
    return tritonclient_http.InferenceServerClient(srv.inference_url.removeprefix("http://"), network_timeout=60)


def test_tritonclient_health_and_metadata(srv: ServerInfo) -> None:
    client = _triton(srv)
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("squeezenet") and not client.is_model_ready("nope")
    assert client.get_server_metadata()["name"] == "mmsctl"
    meta = client.get_model_metadata("squeezenet")
    (tensor,) = meta["inputs"]  # one input: clients that take inputs[0] (Triton's image_client) send FP32 as ever
    assert {k: tensor[k] for k in ("name", "datatype", "shape")} == \
        {"name": "data_0", "datatype": "FP32", "shape": [-1, 3, 224, 224]}
    assert tensor["parameters"]["also_accepts"] == [{"datatype": "BYTES", "shape": [-1], "content_type": "image"}]
    with pytest.raises(tritonclient_http.InferenceServerException, match="not found"):
        client.get_model_metadata("nope")


@pytest.mark.parametrize("binary", [True, False])
def test_tritonclient_classification_matches_the_mms_api(srv: ServerInfo, mms_top5: list[str], binary: bool) -> None:
    kitten = require_shared(KITTEN_JPG).read_bytes()
    client = _triton(srv)
    meta = client.get_model_metadata("squeezenet")
    output = meta["outputs"][0]["name"]
    # what the metadata says a client may send for encoded images, instead of its FP32 tensor
    (accepts,) = [a for a in meta["inputs"][0]["parameters"]["also_accepts"] if a["content_type"] == "image"]
    inp = tritonclient_http.InferInput(meta["inputs"][0]["name"], [1], accepts["datatype"])
    inp.set_data_from_numpy(np.array([kitten], dtype=object), binary_data=True)  # images are not UTF-8: binary
    result = client.infer("squeezenet", [inp], outputs=[
        tritonclient_http.InferRequestedOutput(output, binary_data=binary, class_count=5)])
    rows = result.as_numpy(output)
    labels = [(v.decode() if isinstance(v, bytes) else v).split(":", 2)[2] for v in rows.reshape(-1)]
    assert labels == mms_top5


def test_tritonclient_fp32_tensor_json_and_binary(srv: ServerInfo, mms_top5: list[str]) -> None:
    from PIL import Image

    client = _triton(srv)
    image = Image.open(require_shared(KITTEN_JPG)).convert("RGB").resize((224, 224), Image.BILINEAR)
    batch = np.asarray(image, dtype=np.float32).transpose(2, 0, 1)[None]
    for binary in (True, False):
        inp = tritonclient_http.InferInput("data_0", list(batch.shape), "FP32")
        inp.set_data_from_numpy(batch, binary_data=binary)
        result = client.infer("squeezenet", [inp])
        name = client.get_model_metadata("squeezenet")["outputs"][0]["name"]
        probs = result.as_numpy(name)
        assert probs.shape == (1, 1000) and abs(float(probs.sum()) - 1) < 1e-3
        labels = (SQUEEZENET_DIR / "synset.txt").read_text().splitlines()
        assert "cat" in labels[int(np.argmax(probs))] and "cat" in mms_top5[0]


def test_tritonclient_echo_json_and_binary(srv: ServerInfo) -> None:
    client = _triton(srv)
    for binary in (True, False):
        inp = tritonclient_http.InferInput("body", [1], "BYTES")
        inp.set_data_from_numpy(np.array([b"hello v2"], dtype=object), binary_data=binary)
        result = client.infer("echo", [inp], outputs=[tritonclient_http.InferRequestedOutput("output", binary)])
        assert result.as_numpy("output").reshape(-1)[0] in (b"hello v2", "hello v2")


def test_kserve_rest_client_health_and_infer(srv: ServerInfo, mms_top5: list[str]) -> None:
    pytest.importorskip("kserve", reason="kserve is not installed")
    from kserve import InferInput, InferRequest, InferenceRESTClient, RESTConfig
    from kserve.protocol.infer_type import RequestedOutput

    kitten = require_shared(KITTEN_JPG).read_bytes()

    async def run() -> tuple[bool, bool, bool, list[str], bytes]:
        client = InferenceRESTClient(RESTConfig(protocol="v2", timeout=60))
        try:
            live = await client.is_server_live(srv.inference_url)
            ready = await client.is_server_ready(srv.inference_url)
            model_ready = await client.is_model_ready(srv.inference_url, "squeezenet")
            image = InferInput("data_0", [1], "BYTES")
            image.set_data_from_numpy(np.array([kitten], dtype=object), binary_data=True)
            answer = await client.infer(srv.inference_url, InferRequest(
                "squeezenet", [image], request_outputs=[RequestedOutput("probabilities", {"classification": 5})]),
                model_name="squeezenet")
            top = [str(v.decode() if isinstance(v, bytes) else v).split(":", 2)[2]
                   for v in answer.outputs[0].as_numpy().reshape(-1)]
            echo_in = InferInput("body", [1], "BYTES")
            echo_in.set_data_from_numpy(np.array([b"kserve"], dtype=object), binary_data=False)
            echo = await client.infer(srv.inference_url, InferRequest("echo", [echo_in]), model_name="echo")
            value = echo.outputs[0].as_numpy().reshape(-1)[0]
            return live, ready, model_ready, top, value if isinstance(value, bytes) else str(value).encode()
        finally:
            await client.close()

    live, ready, model_ready, top, echoed = asyncio.run(run())
    assert live and ready and model_ready
    assert top == mms_top5 and echoed == b"kserve"
