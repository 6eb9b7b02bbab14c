"""v2 infer on the fast path answers exactly as aiohttp's full path does (``server/fastpath_v2.py``).

Each request goes to one real server twice: as sent (the fast path takes plain v2 infer requests) and
with a query string (which the fast path never takes: aiohttp answers it, and its route ignores the
query). Status, the headers that matter and the body must be the same. aiohttp's answers carry a
``Server`` header and the fast path's do not: that shows which path answered, so the test also proves
the fast path served what it should and handed over what it should not.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator, Optional

import httpx
import numpy as np
import pytest

from mmsctl.engine.tensors import HEADER_LENGTH, RequestedOutput, Tensor, decode_response, encode_request
from tests.support.mmsctl_server import ServerInfo, make_noop_archive, running_mmsctl_server
from tests.support.paths import KITTEN_JPG, SQUEEZENET_DIR, require_shared

TOKEN = "fast-v2-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LIMIT = 300_000
#: The headers whose values must match between the paths.
COMPARED = ("content-type", HEADER_LENGTH.lower(), "retry-after", "www-authenticate")


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    from mmsctl.archive import create_archive

    store = tmp_path_factory.mktemp("store")
    make_noop_archive(store / "echo", name="echo")
    models = {"echo": "echo"}
    if SQUEEZENET_DIR.is_dir() and KITTEN_JPG.is_file():
        create_archive(SQUEEZENET_DIR, model_name="squeezenet", export_path=store)
        models["squeezenet"] = "squeezenet.mar"
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), model_store=store, models=models, token=TOKEN,
                               extra_config={"max_request_size": LIMIT}) as info:
        yield info


def _bytes(name: str, *values: bytes) -> Tensor:
    data = np.empty(len(values), dtype=object)
    data[:] = list(values)
    return Tensor(name, "BYTES", [len(values)], data)


def _binary(inputs: list[Tensor], outputs: list[RequestedOutput]) -> tuple[bytes, dict[str, str]]:
    body, length = encode_request(inputs, outputs)
    return body, {HEADER_LENGTH: str(length), "Content-Type": "application/octet-stream"}


def _both(srv: ServerInfo, path: str, body: bytes, headers: dict[str, Any],
          auth: Optional[dict[str, str]] = None) -> tuple[httpx.Response, httpx.Response]:
    """The answer of each path: (fast path's or whoever the fast path handed it to, aiohttp's)."""
    sent = {**(AUTH if auth is None else auth), **headers}
    with httpx.Client(timeout=60) as client:
        fast = client.post(srv.inference_url + path, content=body, headers=sent)
    with httpx.Client(timeout=60) as client:
        full = client.post(srv.inference_url + path + "?path=full", content=body, headers=sent)
    assert "server" in full.headers, full.headers  # aiohttp answered the query
    assert fast.status_code == full.status_code, (fast.text[:300], full.text[:300])
    assert [fast.headers.get(k) for k in COMPARED] == [full.headers.get(k) for k in COMPARED]
    assert fast.headers["x-request-id"] != full.headers["x-request-id"]
    return fast, full


def _served_fast(answer: httpx.Response) -> bool:
    return "server" not in answer.headers


def _count(srv: ServerInfo, model: str, code: int) -> int:
    text = httpx.get(srv.metrics_url + "/metrics", headers=AUTH, timeout=30).text
    found = re.search(rf'mmsctl_requests_total{{api="inference",code="{code}",model="{model}"}} (\S+)', text)
    return int(float(found.group(1))) if found else 0


def test_the_requests_clients_send_most_are_served_fast_and_answered_alike(srv: ServerInfo) -> None:
    """bench's binary BYTES infer, binary outputs, plain JSON, a versions URL: 200s from the fast path
    with the full path's exact bytes, counted in the metrics once each."""
    before = _count(srv, "echo", 200)
    bench = _binary([_bytes("body", b"hello")], [])
    binary_out = _binary([_bytes("body", b"\x00\xffraw")], [RequestedOutput("output", True)])
    plain = json.dumps({"id": "r-1", "inputs": [{"name": "body", "datatype": "BYTES", "shape": [1],
                                                   "data": ["hi"]}]}).encode()
    cases = [("/v2/models/echo/infer", *bench), ("/v2/models/echo/infer", *binary_out),
             ("/v2/models/echo/infer", plain, {"Content-Type": "application/json"}),
             ("/v2/models/echo/versions/1.0/infer", *bench)]
    for path, body, headers in cases:
        fast, full = _both(srv, path, body, headers)
        assert fast.status_code == 200 and _served_fast(fast), (path, fast.text)
        assert fast.content == full.content, path
    assert json.loads(_both(srv, *cases[2])[0].content)["outputs"][0]["data"] == ["hi"]
    fast, _ = _both(srv, *cases[1])
    out = decode_response(fast.content, int(fast.headers[HEADER_LENGTH])).outputs[0]
    assert out.datatype == "BYTES" and out.data[0] == "\x00\ufffdraw".encode()  # the echo handler's UTF-8
    assert _count(srv, "echo", 200) - before == 2 * len(cases) + 4  # each answer once, whichever path


def _broken_header(body: bytes) -> list[tuple[str, bytes, dict[str, Any]]]:
    return [("abc", body, {HEADER_LENGTH: "abc"}), ("too long", body, {HEADER_LENGTH: str(len(body) + 1)}),
            ("negative", body, {HEADER_LENGTH: "-1"}), ("superscript two", body, {HEADER_LENGTH: "²".encode()})]


def test_what_the_fast_path_refuses_is_answered_by_the_full_path(srv: ServerInfo) -> None:
    """Unknown model or version, bad Inference-Header-Content-Length, bodies the codec refuses, unknown
    inputs, a body over max_request_size, a wrong or missing token: handed to aiohttp, same answer."""
    body, headers = _binary([_bytes("body", b"hello")], [])
    unknown_input = json.dumps({"inputs": [{"name": "x", "datatype": "BYTES", "shape": [1], "data": ["a"]}]})
    cases: list[tuple[str, str, bytes, dict[str, Any], Optional[dict[str, str]], int]] = [
        ("unknown model", "/v2/models/nope/infer", body, headers, None, 404),
        ("unknown version", "/v2/models/echo/versions/9.9/infer", body, headers, None, 404),
        *[(name, "/v2/models/echo/infer", b, h, None, 400) for name, b, h in _broken_header(body)],
        ("two header lengths", "/v2/models/echo/infer", body, {}, None, 400),
        ("not json", "/v2/models/echo/infer", b"{nope", {}, None, 400),
        ("unknown input", "/v2/models/echo/infer", unknown_input.encode(), {}, None, 400),
        ("oversize", "/v2/models/echo/infer", b"{" + b" " * LIMIT + b"}", {}, None, 413),
        ("wrong token", "/v2/models/echo/infer", body, headers, {"Authorization": "Bearer WRONG"}, 401),
        ("no token", "/v2/models/echo/infer", body, headers, {}, 401),
    ]
    for name, path, data, sent, auth, status in cases:
        if name == "two header lengths":  # httpx sends a list of pairs as they are
            with httpx.Client(timeout=30) as client:
                pairs = [*AUTH.items(), (HEADER_LENGTH, headers[HEADER_LENGTH]), (HEADER_LENGTH, "3")]
                fast = client.post(srv.inference_url + path, content=data, headers=pairs)
                full = client.post(srv.inference_url + path + "?path=full", content=data, headers=pairs)
            assert (fast.status_code, fast.content) == (full.status_code, full.content) and "server" in fast.headers
            continue
        fast, full = _both(srv, path, data, sent, auth)
        assert fast.status_code == status and not _served_fast(fast), (name, fast.status_code, fast.text)
        assert fast.content == full.content and set(fast.json()) == {"error"}, name
    assert "WWW-Authenticate".lower() in fast.headers


def test_errors_after_the_model_ran_are_rendered_as_the_full_path_does(srv: ServerInfo) -> None:
    """An output the model lacks, classification asked of a non-classifier: known only once the model has
    answered, so the fast path answers them itself, with the full path's own status and body."""
    cases = [_binary([_bytes("body", b"x")], [RequestedOutput("nope", True)]),
             _binary([_bytes("body", b"x")], [RequestedOutput("output", True, 3)])]
    for body, headers in cases:
        fast, full = _both(srv, "/v2/models/echo/infer", body, headers)
        assert fast.status_code == 400 and _served_fast(fast)
        assert fast.content == full.content and set(fast.json()) == {"error"}


def test_a_classifier_with_one_image_is_served_fast_and_several_are_handed_over(srv: ServerInfo) -> None:
    """tritonclient's shape: one BYTES image, its top 5 as binary ``classification``; two images are
    queued together by the full path."""
    kitten = require_shared(KITTEN_JPG).read_bytes()
    require_shared(SQUEEZENET_DIR)
    meta = httpx.get(srv.inference_url + "/v2/models/squeezenet", headers=AUTH, timeout=30).json()
    top5 = [RequestedOutput(meta["outputs"][0]["name"], True, 5)]
    fast, full = _both(srv, "/v2/models/squeezenet/infer", *_binary([_bytes("data_0", kitten)], top5))
    assert fast.status_code == 200 and _served_fast(fast) and fast.content == full.content
    out = decode_response(fast.content, int(fast.headers[HEADER_LENGTH])).outputs[0]
    assert out.shape == [1, 5] and "cat" in bytes(out.data.ravel()[0]).decode()
    fast, full = _both(srv, "/v2/models/squeezenet/infer", *_binary([_bytes("data_0", kitten, kitten)], top5))
    assert fast.status_code == 200 and not _served_fast(fast) and fast.content == full.content


def test_a_remembered_request_header_still_reads_each_body_own_binary_part() -> None:
    """The codec parses a binary request's JSON header once (clients resend the same one): a second body with
    that header gets its own data, and one whose binary part does not fit gets the error a first one gets."""
    from mmsctl.engine import tensors
    from mmsctl.engine.tensors import TensorError, decode_request

    first, length = encode_request([_bytes("body", b"one")], [RequestedOutput("output", True, 2)])
    second, _ = encode_request([_bytes("body", b"two")], [RequestedOutput("output", True, 2)])
    assert first[:length] == second[:length] and first != second
    tensors._LAYOUTS.clear()
    a, b = decode_request(first, length), decode_request(second, length)
    assert first[:length] in tensors._LAYOUTS  # the second was read with the remembered header
    assert (a.inputs[0].data[0], b.inputs[0].data[0]) == (b"one", b"two")
    assert (b.outputs[0].classification, b.outputs[0].binary, b.inputs[0].shape) == (2, True, [1])
    b.inputs[0].parameters["changed"] = True  # what one request's caller does is not the next one's
    assert "changed" not in decode_request(second, length).inputs[0].parameters
    bad = second[:length] + b"\x09\x00\x00\x00two"  # its element claims 9 bytes and holds 3
    messages = []
    for _ in range(2):
        with pytest.raises(TensorError) as caught:
            decode_request(bad, length)
        messages.append(str(caught.value))
        tensors._LAYOUTS.clear()
    assert messages[0] == messages[1] and "longer than the data" in messages[0]
