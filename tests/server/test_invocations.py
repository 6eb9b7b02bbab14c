"""SageMaker's /invocations decisions (mmsctl/server/http/invocations.py): what Accept asks for, which body is a v2
request, which model. The answers themselves, on both HTTP paths and the real SqueezeNet, are in
tests/sagemaker/test_contract.py."""

from __future__ import annotations

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
