"""The Open Inference Protocol (KServe v2) on ``mmsctl serve``'s inference port: health, metadata, JSON and
binary infer on the real SqueezeNet and an echo handler, and the hostile bodies the codec refuses with
the protocol's ``{"error": ...}`` and a 4xx (never a 5xx, never a large allocation)."""

from __future__ import annotations

import io
import json
import struct
from typing import Iterator

import httpx
import numpy as np
import pytest

from mmsctl.engine.tensors import HEADER_LENGTH, RequestedOutput, Tensor, decode_response, encode_request
from tests.support.mmsctl_server import ServerInfo, make_noop_archive, running_mmsctl_server
from tests.support.paths import KITTEN_JPG, SQUEEZENET_DIR, require_shared

TOKEN = "v2-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    from mmsctl.archive import create_archive

    store = tmp_path_factory.mktemp("store")
    make_noop_archive(store / "echo", name="echo")
    models = {"echo": "echo"}
    if SQUEEZENET_DIR.is_dir():
        create_archive(SQUEEZENET_DIR, model_name="squeezenet", export_path=store)
        models["squeezenet"] = "squeezenet.mar"
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), model_store=store, models=models, token=TOKEN,
                               extra_config={"max_request_size": 2_000_000}) as info:
        yield info


def _get(srv: ServerInfo, path: str, **kw: object) -> httpx.Response:
    return httpx.get(srv.inference_url + path, headers=AUTH, timeout=30, **kw)  # type: ignore[arg-type]


def _infer(srv: ServerInfo, model: str, body: bytes, header_length: "int | None" = None) -> httpx.Response:
    headers = dict(AUTH)
    if header_length is not None:
        headers[HEADER_LENGTH] = str(header_length)
    return httpx.post(f"{srv.inference_url}/v2/models/{model}/infer", content=body, headers=headers, timeout=60)


def _bytes_tensor(name: str, *values: bytes) -> Tensor:
    data = np.empty(len(values), dtype=object)
    data[:] = list(values)
    return Tensor(name, "BYTES", [len(values)], data)


def test_health_and_server_metadata(srv: ServerInfo) -> None:
    assert httpx.get(srv.inference_url + "/v2/health/live", timeout=10).json() == {"live": True}  # no token
    assert httpx.get(srv.inference_url + "/v2/health/ready", timeout=10).json() == {"ready": True}
    meta = _get(srv, "/v2").json()
    assert meta["name"] == "mmsctl" and "binary_tensor_data" in meta["extensions"]
    refused = httpx.get(srv.inference_url + "/v2", timeout=10)
    assert refused.status_code == 401 and set(refused.json()) == {"error"}


def test_echo_metadata_ready_and_infer_json_and_binary(srv: ServerInfo) -> None:
    meta = _get(srv, "/v2/models/echo").json()
    assert meta["inputs"] == [{"name": "body", "datatype": "BYTES", "shape": [-1]}]
    assert meta["versions"] == ["1.0"] and _get(srv, "/v2/models/echo/versions/1.0").status_code == 200
    assert _get(srv, "/v2/models/echo/ready").json() == {"name": "echo", "ready": True}
    body = json.dumps({"id": "r1", "inputs": [{"name": "body", "datatype": "BYTES", "shape": [1],
                                                "data": ["hello"]}]}).encode()
    answer = _infer(srv, "echo", body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["id"] == "r1" and answer.json()["outputs"][0]["data"] == ["hello"]
    payload, length = encode_request([_bytes_tensor("body", b"\x00\xffraw")], [RequestedOutput("output", True)])
    answer = _infer(srv, "echo", payload, length)
    assert answer.status_code == 200 and HEADER_LENGTH in answer.headers
    decoded = decode_response(answer.content, int(answer.headers[HEADER_LENGTH]))
    assert decoded.outputs[0].data[0] == "\x00\ufffdraw".encode()  # the echo handler decodes as UTF-8


@pytest.mark.parametrize("path, status", [
    ("/v2/models/nope", 404), ("/v2/models/echo/versions/9.9", 404), ("/v2/models/nope/ready", 404),
    ("/v2/nothing/here", 404),
])
def test_unknown_things_are_404_in_the_protocol_form(srv: ServerInfo, path: str, status: int) -> None:
    answer = _get(srv, path)
    assert answer.status_code == status and set(answer.json()) == {"error"}, answer.text


HOSTILE = [
    (b"not json", None),
    (b"[1, 2]", None),
    (json.dumps({"inputs": []}).encode(), None),
    (json.dumps({"inputs": [{"name": "body", "datatype": "BYTES", "shape": [2], "data": ["one"]}]}).encode(), None),
    (json.dumps({"inputs": [{"name": "body", "datatype": "FP32", "shape": [1 << 40],
                             "data": [1.0]}]}).encode(), None),
    (json.dumps({"inputs": [{"name": "body", "datatype": "FP99", "shape": [1], "data": [1]}]}).encode(), None),
    (json.dumps({"inputs": [{"name": "body", "datatype": "FP32", "shape": [-1], "data": [1]}]}).encode(), None),
    (json.dumps({"inputs": [{"name": "body", "datatype": "FP32", "shape": [2], "data": [[1], [[2]], 3]}]}).encode(), None),
    (json.dumps({"inputs": [{"name": "body", "datatype": "FP32", "shape": [1], "data": "x" * 10}]}).encode(), None),
    (("[" * 100_000 + "]" * 100_000).encode(), None),
    (json.dumps({"inputs": [{"name": "body", "datatype": "BYTES", "shape": [1],
                             "parameters": {"binary_data_size": 100}}]}).encode(), None),
    (b'{"inputs":[{"name":"body","datatype":"BYTES","shape":[1],"parameters":{"binary_data_size":8}}]}'
     + struct.pack("<I", 0xFFFFFFF0) + b"abcd", 93),
    (b'{"inputs":[]}', 10_000),
    (b'{"inputs":[]}', -1),
    (json.dumps({"inputs": [{"name": "other", "datatype": "BYTES", "shape": [1], "data": ["x"]}]}).encode(), None),
]


@pytest.mark.parametrize("body, header_length", HOSTILE)
def test_hostile_infer_bodies_are_400s(srv: ServerInfo, body: bytes, header_length: "int | None") -> None:
    headers = dict(AUTH)
    if header_length is not None:
        headers[HEADER_LENGTH] = str(header_length)
    answer = httpx.post(f"{srv.inference_url}/v2/models/echo/infer", content=body, headers=headers, timeout=30)
    assert answer.status_code == 400, answer.text
    assert set(answer.json()) == {"error"}


def test_a_body_over_max_request_size_is_413_in_the_protocol_form(srv: ServerInfo) -> None:
    answer = _infer(srv, "echo", b"{" + b" " * 2_100_000 + b"}")
    assert answer.status_code == 413 and set(answer.json()) == {"error"}


def _kitten_classes(srv: ServerInfo) -> list[str]:
    kitten = require_shared(KITTEN_JPG).read_bytes()
    answer = httpx.post(f"{srv.inference_url}/predictions/squeezenet", content=kitten, headers=AUTH, timeout=60)
    assert answer.status_code == 200, answer.text
    return [row["class"] for row in answer.json()]


def test_squeezenet_metadata_and_bytes_infer_match_the_mms_api(srv: ServerInfo) -> None:
    kitten = require_shared(KITTEN_JPG).read_bytes()
    meta = _get(srv, "/v2/models/squeezenet").json()
    assert meta["inputs"] == [{"name": "data_0", "datatype": "FP32", "shape": [-1, 3, 224, 224],  # one input,
                               "parameters": {"also_accepts": [  # and what else it takes: encoded images
                                   {"datatype": "BYTES", "shape": [-1], "content_type": "image"}]}}]
    assert meta["outputs"][0]["shape"] == [-1, 1000]
    payload, length = encode_request([_bytes_tensor("data_0", kitten, kitten)],
                                     [RequestedOutput(meta["outputs"][0]["name"], True, 5)])
    answer = _infer(srv, "squeezenet", payload, length)
    assert answer.status_code == 200, answer.text
    out = decode_response(answer.content, int(answer.headers[HEADER_LENGTH])).outputs[0]
    assert out.shape == [2, 5]
    rows = [[bytes(v).decode().split(":", 2) for v in row] for row in np.asarray(out.data).reshape(2, 5)]
    expected = _kitten_classes(srv)
    assert [label for _, _, label in rows[0]] == expected == [label for _, _, label in rows[1]]
    assert "cat" in expected[0] and float(rows[0][0][0]) > float(rows[0][4][0])


def test_squeezenet_fp32_tensor_input_gives_every_probability(srv: ServerInfo) -> None:
    from PIL import Image

    require_shared(SQUEEZENET_DIR)
    image = Image.open(io.BytesIO(require_shared(KITTEN_JPG).read_bytes())).convert("RGB").resize((224, 224))
    chw = np.asarray(image, dtype=np.float32).transpose(2, 0, 1)[None]
    payload, length = encode_request([Tensor("data_0", "FP32", [1, 3, 224, 224], chw)], [])
    answer = _infer(srv, "squeezenet", payload, length)
    assert answer.status_code == 200, answer.text
    out = answer.json()["outputs"][0]
    probs = np.asarray(out["data"], dtype=np.float32)
    assert out["shape"] == [1, 1000] and abs(float(probs.sum()) - 1.0) < 1e-3
    labels = (SQUEEZENET_DIR / "synset.txt").read_text().splitlines()
    assert "cat" in labels[int(np.argmax(probs))]


def test_squeezenet_refuses_a_wrong_tensor_shape_and_a_bad_image(srv: ServerInfo) -> None:
    require_shared(SQUEEZENET_DIR)
    wrong = Tensor("data_0", "FP32", [1, 3, 8, 8], np.zeros((1, 3, 8, 8), dtype=np.float32))
    payload, length = encode_request([wrong], [])
    assert _infer(srv, "squeezenet", payload, length).status_code == 400
    payload, length = encode_request([_bytes_tensor("data_0", b"not an image")], [])
    answer = _infer(srv, "squeezenet", payload, length)
    assert answer.status_code == 400 and set(answer.json()) == {"error"}


def test_a_fake_npy_header_claiming_a_huge_array_is_refused(srv: ServerInfo) -> None:
    """An .npy body sent straight to the MMS API: its header is checked before anything is allocated."""
    require_shared(SQUEEZENET_DIR)
    fake = io.BytesIO()
    np.lib.format.write_array_header_1_0(fake, {"descr": "<f4", "fortran_order": False, "shape": (1 << 20, 1 << 20, 3)})
    answer = httpx.post(f"{srv.inference_url}/predictions/squeezenet", content=fake.getvalue() + b"x" * 64,
                        headers=AUTH, timeout=60)
    assert answer.status_code == 400 and "shape" in answer.json()["message"]
