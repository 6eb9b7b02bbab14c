"""The MMS 1.1.11 handler contract: what handlers receive, how they are found, how failures look."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmsctl.engine.protocol import Parameter, RequestItem
from mmsctl.errors import EngineError, HandlerError
from tests.engine.helpers import body_item, handler_archive, load

PROBE = '''
import json

def describe(v):
    return [type(v).__name__, v if isinstance(v, (str, dict, list, int)) else bytes(v).decode("latin-1")]

def handle(data, context):
    if data is None:
        return None
    out = []
    for idx, req in enumerate(data):
        context.set_response_status(201, "Made", idx)
        context.set_response_content_type(idx, "application/x-probe")
        context.set_response_header(idx, "X-Idx", str(idx))
        context.metrics.add_time("ProbeTime", 1.5, idx)
        out.append({
            "keys": sorted(req),
            "values": {k: describe(v) for k, v in req.items()},
            "header_ct": context.get_request_header(idx, "content-type"),
            "param_ct": context.get_request_header(idx, "body"),
            "request_id": context.get_request_id(idx),
            "props": context.system_properties,
            "model_name": context.model_name,
            "manifest_model": (context.manifest or {}).get("model"),
        })
    return out
'''


def _probe(tmp_path: Path, **kw: object):
    archive = handler_archive(tmp_path / "m", {"probe.py": PROBE}, handler="probe:handle", model_name="probe")
    return load(archive, **kw)  # type: ignore[arg-type]


def test_data_and_context_match_mms(tmp_path: Path) -> None:
    svc = _probe(tmp_path, batch_size=4, model_name="served")
    items = [
        body_item("r-img", b"\xff\xd8binary", "image/jpeg", topk="3"),
        body_item("r-json", b'{"a": [1, 2]}', "application/json; charset=utf-8"),
        body_item("r-text", "héllo".encode(), "text/plain"),
        RequestItem("r-form", [Parameter("data_0", b"abc", "image/png"), Parameter("name", "x")]),
    ]
    responses = svc.handle(items)
    assert [r.status for r in responses] == [201] * 4
    assert all(r.reason == "Made" for r in responses)
    assert [r.content_type for r in responses] == ["application/x-probe"] * 4
    assert [r.headers for r in responses] == [{"X-Idx": str(i)} for i in range(4)]
    seen = [json.loads(r.body) for r in responses]
    # MMS: JSON parsed, text/* as str, anything else (query/form fields too) as bytearray
    assert seen[0]["values"] == {"body": ["bytearray", "\xff\xd8binary"], "topk": ["bytearray", "3"]}
    assert seen[1]["values"] == {"body": ["dict", {"a": [1, 2]}]}
    assert seen[2]["values"] == {"body": ["str", "héllo"]}
    assert seen[3]["keys"] == ["data_0", "name"]
    # request headers and the per-parameter content type, as MMS's RequestProcessor holds them
    assert seen[0]["header_ct"] == "image/jpeg"
    assert seen[0]["param_ct"] == {"content-type": "image/jpeg"}
    assert [s["request_id"] for s in seen] == ["r-img", "r-json", "r-text", "r-form"]
    props = seen[0]["props"]
    assert props["batch_size"] == 4 and props["gpu_id"] is None and props["server_name"] == "mmsctl"
    assert Path(props["model_dir"]) == tmp_path / "m"
    assert seen[0]["model_name"] == "served"
    assert seen[0]["manifest_model"]["modelName"] == "probe"
    # responses are MMS-encoded: non-bytes/str results become json.dumps(value, indent=2)
    assert responses[0].body.decode().startswith('{\n  "keys"')
    assert {m.name for m in svc.last_metrics.store} >= {"ProbeTime", "PredictionTime"}


def test_a_body_that_is_not_what_its_type_says_reaches_the_handler_raw(tmp_path: Path) -> None:
    """Invalid JSON, or bytes that are not UTF-8 sent as text (an image from hey): the handler gets the
    bytes (MMS fails the whole batch), and the rest of the batch is untouched."""
    svc = _probe(tmp_path, batch_size=3)
    not_json, not_text, good = svc.handle([body_item("a", b"{nope", "application/json"),
                                           body_item("b", b"\xff\xd8\xff", "text/html"),
                                           body_item("c", b"{}", "application/json")])
    assert json.loads(not_json.body)["values"]["body"] == ["bytearray", "{nope"]
    assert json.loads(not_text.body)["values"]["body"] == ["bytearray", "\xff\xd8\xff"]
    assert json.loads(good.body)["values"]["body"] == ["dict", {}]
    assert {r.status for r in (not_json, not_text, good)} == {201}


def test_one_class_module_is_instantiated_and_initialised(tmp_path: Path) -> None:
    src = '''
    class Echo(object):
        def __init__(self):
            self.ready = False
        def initialize(self, context):
            self.ready = context.system_properties["batch_size"]
        def handle(self, data, context):
            return ["%s:%s" % (self.ready, bytes(d["body"]).decode()) for d in data]
    '''
    svc = load(handler_archive(tmp_path / "m", {"echo.py": src}, handler="echo"), batch_size=3)
    out = svc.handle([body_item("1", b"a"), body_item("2", b"b")])
    assert [r.body for r in out] == [b"3:a", b"3:b"]
    assert [r.content_type for r in out] == [None, None]  # MMS sends none unless the handler sets one


def test_module_function_and_py_suffix(tmp_path: Path) -> None:
    src = '''
    calls = []
    def handle(data, context):
        raise AssertionError("not this one")
    def upper(data, context):
        calls.append(data)
        return None if data is None else [bytes(d["body"]).upper() for d in data]
    '''
    archive = handler_archive(tmp_path / "m", {"svc.py": src}, handler="svc.py:upper")
    svc = load(archive)
    assert svc.handle([body_item("1", b"abc")])[0].body == b"ABC"


@pytest.mark.parametrize(
    "handler, files, message",
    [
        ("missing_module:handle", {}, "handler module 'missing_module' not found"),
        (":handle", {}, "invalid handler"),
        ("broken", {"broken.py": "import not_installed_dep_xyz\n"}, "No module named 'not_installed_dep_xyz'"),
        ("syntax", {"syntax.py": "def handle(:\n"}, "SyntaxError"),
        ("two", {"two.py": "class A: pass\nclass B: pass\n"}, "defines 2 classes (A, B)"),
        ("nothing", {"nothing.py": "X = 1\n"}, "defines 0 classes"),
        ("initfail", {"initfail.py": "def handle(d, c):\n    raise RuntimeError('no weights')\n"},
         "failed to initialise: RuntimeError: no weights"),
    ],
)
def test_bad_handlers_are_one_clear_error(tmp_path: Path, handler: str, files: dict, message: str) -> None:
    archive = handler_archive(tmp_path / "m", files, handler=handler)
    with pytest.raises(HandlerError) as info:
        load(archive)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_no_handler_and_no_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(HandlerError, match="names no handler"):
        load(handler_archive(tmp_path / "m", {}, handler=None))


@pytest.mark.parametrize(
    "body, status, message",
    [
        ("raise ValueError('boom')", 503, "Prediction failed"),
        ("return 'not a list'", 503, "Invalid model predict output"),
        ("return [1]", 503, "number of batch response mismatched"),
        ("return [object(), object()]", 503, "Unsupported model output data type."),
        ("raise MemoryError()", 507, "Out of resources"),
        ("raise PredictionException('too big', 413)", 413, "too big"),
    ],
)
def test_batch_failures_match_mms(tmp_path: Path, body: str, status: int, message: str) -> None:
    src = f'''
    class PredictionException(Exception):
        def __init__(self, message, error_code=500):
            super().__init__(message)
            self.message = message
            self.error_code = error_code

    def handle(data, context):
        if data is None:
            return None
        {body}
    '''
    svc = load(handler_archive(tmp_path / "m", {"h.py": src}, handler="h:handle"), batch_size=2)
    responses = svc.handle([body_item("1", b"a"), body_item("2", b"b")])
    for r in responses:
        assert r.status == status
        assert json.loads(r.body) == {"code": status, "type": "InternalServerException", "message": message}
        assert r.content_type == "application/json"
    assert svc.last_exception is not None


def test_models_with_same_module_names_stay_apart(tmp_path: Path) -> None:
    services = []
    for word in ("left", "right"):
        files = {
            "helper.py": f"WORD = {word!r}\n",
            "svc.py": "import helper\ndef handle(d, c):\n    return None if d is None else [helper.WORD for _ in d]\n",
        }
        services.append(load(handler_archive(tmp_path / word, files, handler="svc")))
    import sys

    assert "helper" not in sys.modules and "svc" not in sys.modules
    assert [s.handle([body_item("1", b"")])[0].body for s in services] == [b"left", b"right"]


def test_handler_override_from_a_file(tmp_path: Path) -> None:
    other = tmp_path / "elsewhere" / "mine.py"
    other.parent.mkdir()
    other.write_text("def handle(d, c):\n    return None if d is None else ['mine' for _ in d]\n")
    archive = handler_archive(tmp_path / "m", {}, handler="absent:handle")
    svc = load(archive, handler_override=str(other))
    assert svc.handle([body_item("1", b"")])[0].body == b"mine"


def test_gpu_on_a_cpu_build_is_a_clear_error(tmp_path: Path) -> None:
    from mmsctl.engine.mxnet_compat import import_mxnet

    if import_mxnet().context.num_gpus() > 0:
        pytest.skip("a GPU is visible here")
    with pytest.raises(EngineError, match="no GPU available"):
        _probe(tmp_path, gpu_id=0)


def test_a_pinned_model_keeps_its_modules_and_still_answers(tmp_path: Path) -> None:
    """A worker serves one model: pinned, its modules stay in sys.modules between batches (no swap per
    batch) and leave nothing of another model's behind; unpinned services still swap (test above)."""
    import sys

    files = {
        "pinhelper.py": "WORD = 'pinned'\n",
        "pinsvc.py": "import pinhelper\ndef handle(d, c):\n    return None if d is None else [pinhelper.WORD for _ in d]\n",
    }
    svc = load(handler_archive(tmp_path / "p", files, handler="pinsvc"))
    assert "pinhelper" not in sys.modules
    try:
        svc.pin()
        assert sys.modules["pinhelper"].WORD == "pinned"  # in scope from now on
        for _ in range(3):
            assert svc.handle([body_item("1", b"")])[0].body == b"pinned"
            assert "pinhelper" in sys.modules and str(tmp_path / "p") in sys.path  # not swapped out per batch
    finally:
        svc._handler.scope.__exit__(None, None, None)  # unpin: leave this test process as it was
    assert "pinhelper" not in sys.modules and str(tmp_path / "p") not in sys.path
