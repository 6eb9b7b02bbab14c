"""SageMaker's /invocations decisions (mmsctl/server/http/invocations.py): what Accept asks for, which body is a v2
request, which model. The answers themselves, on both HTTP paths and the real SqueezeNet, are in
tests/sagemaker/test_contract.py."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import pytest

from mmsctl.server.errors import BadRequest
from mmsctl.server.http.invocations import answer_form, is_v2_body, model_name

JSON, NPY = "application/json", "application/x-npy"


@pytest.mark.parametrize("accept, form", [
    (None, JSON), ("", JSON), ("*/*", JSON), ("application/*", JSON), (JSON, JSON),
    (NPY, NPY), (f"{NPY}, {JSON};q=0.5", NPY), (f"{JSON}, {NPY}", JSON),
    ("*/*, application/x-npy", NPY),  # the exact type beats the wildcard at the same quality
    (f"{NPY};q=0, */*", JSON),  # q=0: refused
    ("text/csv", None), ("text/csv, application/json;q=0.1", JSON), (f"{NPY};q=nan", None),
    (f"{NPY};q=2", None), ("image/png, " * 40 + NPY, None),  # at most 32 ranges read
])
def test_accept(accept: Optional[str], form: Optional[str]) -> None:
    assert answer_form(accept) == form


def test_v2_bodies() -> None:
    assert is_v2_body(JSON, b'{"inputs": []}', {})
    assert not is_v2_body(JSON, b'{"data": {"inputs": 1}}', {})  # "inputs" nested: MMS's form
    assert not is_v2_body(JSON, b'{"inputs": ', {}) and not is_v2_body(JSON, b'{"inputs": ' + b"[" * 100_000, {})
    assert is_v2_body("application/octet-stream", b"\x00", {"inference-header-content-length": "3"})


class _Manager:
    def __init__(self, *names: str) -> None:
        self.startup_models = set(names)


def test_which_model() -> None:
    one, two = _Manager("squeezenet"), _Manager("a", "b")
    assert model_name(one, None, {}) == "squeezenet"
    assert model_name(two, None, {"x-model-name": "b"}) == "b" == model_name(two, None, {"model_name": "b"})
    assert model_name(two, "a", {"x-model-name": "b"}) == "a"
    with pytest.raises(BadRequest, match="model_name is required"):
        model_name(two, None, {})


def test_a_json_v2_invocation_is_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Telling a JSON v2 body from MMS's form parses it; the codec takes that parse, not parsing the body again
    (a large body costs one parse, not two)."""
    from mmsctl.engine.spec import ServiceSpec
    from mmsctl.server.http.invocations import invocation_call
    from mmsctl.server.v2.calls import V2Call
    from mmsctl.server.workers.model import Model
    from tests.support.mmsctl_server import make_noop_archive

    model = Model(name="echo", url="echo",
                  spec=ServiceSpec(make_noop_archive(tmp_path / "echo", name="echo"), "echo", "noop_service:handle"))
    body = json.dumps({"inputs": [{"name": "body", "shape": [1], "datatype": "BYTES", "data": ["hi"]}]}).encode()
    request = SimpleNamespace(request_id="r", query=(), headers={"content-type": JSON}, raw_headers=[], body=body)
    parses, loads = [], json.loads
    monkeypatch.setattr(json, "loads", lambda text, *a, **k: parses.append(len(text)) or loads(text, *a, **k))
    call = invocation_call(model, request, 1 << 20)  # type: ignore[arg-type]
    assert isinstance(call, V2Call) and call.groups[0][0].parameters[0].value == b"hi"
    assert parses == [len(body)]
