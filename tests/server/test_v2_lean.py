"""v2 infer on the lean path answers exactly as aiohttp's path does (``server/v2/calls.py``, both paths' call).

Each request goes to one real server twice: as sent (the lean path takes every v2 infer request line without a
query) and with a query string (which the lean path never takes: aiohttp answers it, and its route ignores the
query). Status, the headers that matter and the body must be the same. aiohttp's answers carry a ``Server``
header and the lean path's do not: that shows which path answered, so the test also proves the lean path
finished every request it took, refusals included.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator, Optional

import httpx
import numpy as np
import pytest

from mmsctl.engine.protocol import ResponseItem
from mmsctl.engine.tensors import HEADER_LENGTH, RequestedOutput, Tensor, decode_response, encode_request
from mmsctl.server.workers.manager import ModelManager
from mmsctl.server.workers.model import Model
from tests.support.leaks import LEAK
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
    """The answer of each path: (the lean path's, aiohttp's)."""
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


def test_the_requests_clients_send_most_are_served_lean_and_answered_alike(srv: ServerInfo) -> None:
    """bench's binary BYTES infer, binary outputs, plain JSON, a versions URL: 200s from the lean path
    with aiohttp's exact bytes, counted in the metrics once each."""
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


def test_refusals_are_answered_on_the_lean_path_as_aiohttp_answers_them(srv: ServerInfo) -> None:
    """Unknown model or version, bad Inference-Header-Content-Length (or two), bodies the codec refuses, unknown
    inputs, a body over max_request_size, a wrong or missing token: the lean path answers what it took, with
    aiohttp's answer."""
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
            assert (fast.status_code, fast.content) == (full.status_code, full.content) and _served_fast(fast)
            continue
        fast, full = _both(srv, path, data, sent, auth)
        assert fast.status_code == status and _served_fast(fast), (name, fast.status_code, fast.text)
        assert fast.content == full.content and set(fast.json()) == {"error"}, name
    assert "WWW-Authenticate".lower() in fast.headers


def _tensor_body(datatype: str, shape: list[Any], data: list[Any], name: str = "body") -> bytes:
    return json.dumps({"inputs": [{"name": name, "datatype": datatype, "shape": shape, "data": data}]}).encode()


#: Tensors numpy or the codec once met with a 500 or silently changed: each a 400 naming where it is wrong.
HOSTILE_TENSORS = [
    ("a 0 before a huge dimension", "echo", _tensor_body("FP32", [0, 1180591620717411303424], []),
     "input 0 'body': shape[1] is more than"),
    ("a lone surrogate", "echo", _tensor_body("BYTES", [2], ["ok", "\ud800"]), "input 0 'body': data element 1"),
    ("a lone surrogate for a classifier", "squeezenet", _tensor_body("BYTES", [1], ["\udbff"], "images"),
     "input 0 'images': data element 0"),
    ("an INT8 past its range", "echo", _tensor_body("INT8", [2], [1, 300]), "input 0 'body': data element 1"),
    ("an INT64 past its range", "echo", _tensor_body("INT64", [1], [2**70]), "input 0 'body': data element 0"),
    ("a fraction for an integer", "echo", _tensor_body("UINT8", [1], [1.5]), "input 0 'body': data element 0"),
    ("an FP16 past its range", "echo", _tensor_body("FP16", [1], [1e300]), "input 0 'body': data element 0"),
]


@pytest.mark.parametrize("model, body, where", [case[1:] for case in HOSTILE_TENSORS],
                         ids=[case[0] for case in HOSTILE_TENSORS])
def test_hostile_tensors_are_400s_naming_the_element_on_both_paths(srv: ServerInfo, model: str, body: bytes,
                                                                   where: str) -> None:
    if model == "squeezenet" and not SQUEEZENET_DIR.is_dir():
        pytest.skip("../shared has no squeezenet")
    fast, full = _both(srv, f"/v2/models/{model}/infer", body, {"Content-Type": "application/json"})
    message = fast.json()["error"]
    assert fast.status_code == 400 and fast.content == full.content, fast.text
    assert message.startswith(where), message
    assert not LEAK.search(message), message


def test_errors_after_the_model_ran_are_rendered_alike(srv: ServerInfo) -> None:
    """An output the model lacks, classification asked of a non-classifier: known only once the model has
    answered; the lean path renders them with the same call aiohttp's route uses."""
    cases = [_binary([_bytes("body", b"x")], [RequestedOutput("nope", True)]),
             _binary([_bytes("body", b"x")], [RequestedOutput("output", True, 3)])]
    for body, headers in cases:
        fast, full = _both(srv, "/v2/models/echo/infer", body, headers)
        assert fast.status_code == 400 and _served_fast(fast)
        assert fast.content == full.content and set(fast.json()) == {"error"}


def test_a_classifier_with_one_image_or_several_is_served_lean(srv: ServerInfo) -> None:
    """tritonclient's shape: one BYTES image, its top 5 as binary ``classification``; two images are queued
    together, on either path."""
    kitten = require_shared(KITTEN_JPG).read_bytes()
    require_shared(SQUEEZENET_DIR)
    meta = httpx.get(srv.inference_url + "/v2/models/squeezenet", headers=AUTH, timeout=30).json()
    top5 = [RequestedOutput(meta["outputs"][0]["name"], True, 5)]
    fast, full = _both(srv, "/v2/models/squeezenet/infer", *_binary([_bytes("data_0", kitten)], top5))
    assert fast.status_code == 200 and _served_fast(fast) and fast.content == full.content
    out = decode_response(fast.content, int(fast.headers[HEADER_LENGTH])).outputs[0]
    assert out.shape == [1, 5] and "cat" in bytes(out.data.ravel()[0]).decode()
    fast, full = _both(srv, "/v2/models/squeezenet/infer", *_binary([_bytes("data_0", kitten, kitten)], top5))
    assert fast.status_code == 200 and _served_fast(fast) and fast.content == full.content



def test_a_repeated_header_is_answered_alike_and_a_body_it_does_not_fit_is_refused(srv: ServerInfo) -> None:
    """The third request with one header is made from its recipe: still aiohttp's bytes; then a body whose
    element does not fill its size, with that header, is refused as a first one would be."""
    for data in (b"one", b"two", b"\xffix"):
        body, headers = _binary([_bytes("body", data)], [RequestedOutput("output", True)])
        fast, full = _both(srv, "/v2/models/echo/infer", body, headers)
        assert fast.status_code == 200 and _served_fast(fast) and fast.content == full.content
        assert decode_response(fast.content, int(fast.headers[HEADER_LENGTH])).outputs[0].data[0] \
            == data.decode("utf-8", "replace").encode()
    bad = body[:int(headers[HEADER_LENGTH])] + b"\x09\x00\x00\x00six"
    fast, full = _both(srv, "/v2/models/echo/infer", bad, headers)
    assert fast.status_code == 400 and _served_fast(fast) and fast.content == full.content

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


# -- recipes: a repeated request header, planned once (``calls._Recipe``) ----------------------------------------
def _manager(tmp: Path) -> tuple[ModelManager, dict[str, Model]]:
    """A real model manager with two non-classifiers: echo (one BYTES input ``body``) and pair (declares the
    BYTES inputs a and b, output out), and a registration of echo's name with pair's folder."""
    from mmsctl.engine.spec import ServiceSpec
    from mmsctl.server.config import ServerConfig

    make_noop_archive(tmp / "echo", name="echo")
    make_noop_archive(tmp / "pair", name="pair")
    (tmp / "pair" / "signature.json").write_text(json.dumps({
        "inputs": [{"data_name": n, "datatype": "BYTES", "data_shape": [1]} for n in ("a", "b")],
        "outputs": [{"data_name": "out", "datatype": "BYTES", "data_shape": [1]}]}))
    manager = ModelManager(ServerConfig(), None)
    models = {name: Model(name=name, url=name, spec=ServiceSpec(tmp / name, name, "noop_service:handle"))
              for name in ("echo", "pair")}
    models["echo-as-pair"] = Model(name="echo", url="echo", spec=models["pair"].spec)
    models["echo-2.0"] = Model(name="echo", url="echo", spec=models["echo"].spec, version="2.0")
    manager.models.update({"echo": models["echo"], "pair": models["pair"]})
    return manager, models


def _request(body: bytes, length: Optional[Any]) -> tuple[dict[str, str], list[tuple[bytes, bytes]]]:
    raw = [(b"Host", b"x"), (b"Content-Type", b"application/octet-stream")]
    if length is not None:
        raw.append((HEADER_LENGTH.encode(), str(length).encode()))
    return {k.decode().lower(): v.decode() for k, v in raw}, raw


def _prepare(manager: ModelManager, name: str, body: bytes, length: Optional[Any], *, memo: bool = True) -> Any:
    """The call for this request (or its refusal: status and message): with what earlier requests left
    remembered, or (memo False) as the first request of a fresh server makes it (nothing remembered)."""
    from mmsctl.engine import tensors
    from mmsctl.server.errors import ApiException
    from mmsctl.server.v2 import calls

    if not memo:
        calls._RECIPES.clear()
        tensors._LAYOUTS.clear()
    headers, raw = _request(body, length)
    request = SimpleNamespace(request_id="req-1", query=(), headers=headers, raw_headers=raw, body=body)
    try:
        return calls.infer_call(manager.get(name), None, request, LIMIT)
    except ApiException as exc:
        return exc.status, exc.message


#: Worker answers each call is rendered for: plain, empty, not UTF-8 with JSON escapes, long, another 2xx, errors.
_ANSWERS = [(200, b"hello"), (200, b""), (200, b'\xff\x00"\\ \xe2\x82\xac\n</'), (200, b"y" * 70_000),
            (201, b"x"), (500, b'{"code": 500, "type": "InternalServerException", "message": "boom"}'),
            (503, b"not json")]


def _reply(call: Any, status: int, answer: bytes) -> tuple[Any, ...]:
    reply = call.reply([ResponseItem(status, answer)])
    return reply.status, reply.body, reply.content_type, reply.headers, reply.close


def _same_as_unmemoised(manager: ModelManager, name: str, body: bytes, length: Optional[Any]) -> Any:
    """The call for the request (made with what is remembered), checked against the unmemoised one: the same
    refusal (then None), or the same queued requests and the same answer to every worker answer."""
    from mmsctl.server.v2 import calls

    call = _prepare(manager, name, body, length)
    kept = dict(calls._RECIPES)
    full = _prepare(manager, name, body, length, memo=False)
    calls._RECIPES.clear()
    calls._RECIPES.update(kept)
    if isinstance(full, tuple):
        assert call == full
        return None
    assert full.plan is not None and call.groups == full.groups
    for status, answer in _ANSWERS:
        assert _reply(call, status, answer) == _reply(full, status, answer), (status, answer)
    return call


def _header(spec: dict[str, Any], *blobs: bytes) -> tuple[bytes, int]:
    head = json.dumps(spec).encode()
    return head + b"".join(len(b).to_bytes(4, "little") + b for b in blobs), len(head)


def test_a_repeated_header_is_planned_once_and_answered_as_the_steps_answer(tmp_path: Path) -> None:
    """The request shapes clients repeat: each sent three times with its own data; the third is made from the
    recipe (no plan until an error answer needs one) and every one queues and answers exactly what the steps make of it."""
    from mmsctl.server.v2 import calls

    manager, _ = _manager(tmp_path)
    calls._RECIPES.clear()
    pair = {"inputs": [{"name": n, "datatype": "BYTES", "shape": [1], "parameters": {"binary_data_size": 7}}
                       for n in ("b", "a")], "id": "r-\u00e9\"1"}
    shapes: list[tuple[str, Any, bool]] = [
        ("echo", lambda d: encode_request([_bytes("body", d)], []), True),  # mmsctl bench's
        ("echo", lambda d: encode_request([_bytes("body", d)], [RequestedOutput("output", True)]), True),
        ("echo", lambda d: encode_request([_bytes("body", d)], [RequestedOutput("output", False)], request_id="i"),
         True),
        ("echo", lambda d: _header({"inputs": [{"name": "body", "datatype": "BYTES", "shape": [1, 1], "parameters": {
            "binary_data_size": 7}}], "parameters": {"binary_data_output": True}}, d), True),
        ("pair", lambda d: _header(pair, d, d[::-1]), True),
        ("echo", lambda d: encode_request([_bytes("body", d)], [RequestedOutput("output", True, 2)]), False),
        ("echo", lambda d: encode_request([_bytes("body", d)], [RequestedOutput("nope")]), False),
    ]
    for name, make, remembered in shapes:
        made = [_same_as_unmemoised(manager, name, *make(data)) for data in (b"one", b"two", b"\xff\x00z")]
        assert [c.answer is not None for c in made] == [False, False, remembered], (name, make(b"one"))
    assert sum(isinstance(r, calls._Recipe) for r in calls._RECIPES.values()) == 5


def test_what_a_recipe_does_not_fit_gets_what_the_unmemoised_path_gives(tmp_path: Path) -> None:
    """With the bench's header remembered: element lengths that do not fill their sizes, extra or missing bytes,
    the same header spelt with another length text, another model or version registered under the name, a
    signature cache emptied since: each gets what the steps give (refused, or their exact answer)."""
    from mmsctl.server.v2 import calls, models as v2_models

    manager, models = _manager(tmp_path)
    body, length = encode_request([_bytes("body", b"hello")], [])
    for _ in range(2):
        _same_as_unmemoised(manager, "echo", body, length)
    head = body[:length]
    assert isinstance(calls._RECIPES[("echo", None, str(length), head)], calls._Recipe)
    refused = [head + b"\x06\x00\x00\x00hello", head + b"\x04\x00\x00\x00hello", body + b"!", body[:-1],
               head + b"\xff\xff\xff\xffhello"]
    for wrong in refused:
        assert _same_as_unmemoised(manager, "echo", wrong, length) is None, wrong
    for text in (f" {length}", f"0{length}", f"+{length}", f"{length}\u00b2", f"{length}_0", f"{length - 1}"):
        _same_as_unmemoised(manager, "echo", body, text)
    assert _same_as_unmemoised(manager, "echo", body, length).answer  # the recipe still serves the header
    manager.models["echo"] = models["echo-2.0"]
    assert b'"2.0"' in _same_as_unmemoised(manager, "echo", body, length).reply([ResponseItem(200, b"x")]).body
    manager.models["echo"] = models["echo-as-pair"]
    assert _same_as_unmemoised(manager, "echo", body, length) is None  # pair takes a and b, not body
    manager.models["echo"] = models["echo"]
    assert _same_as_unmemoised(manager, "echo", body, length).answer is None  # made anew for this model
    assert _same_as_unmemoised(manager, "echo", body, length).answer
    v2_models.generation += 1  # what emptying the signature cache does
    assert _same_as_unmemoised(manager, "echo", body, length).answer is None
