"""mmsctl's v2 client and ``predict --context`` against a real TorchServe 0.12 with its KServe v2 envelope
(``service_envelope=kservev2``, token auth on).

What TorchServe 0.12 does there (pytorch/serve ``ts/torch_handler/request_envelope/kservev2.py`` and its
frontend's ``InferenceRequestHandler``): it answers ``POST /v2/models/{name}/infer`` only (no ``/v2``
metadata, health, model metadata or versioned routes), reads the body as JSON (no binary tensor
extension; a BYTES input reaches the handler as ``data[0]``) and answers JSON outputs named after the
inputs. The client copes: no ``binary_tensor_data`` in the (missing) server metadata means JSON, and a
model without a metadata route gets one BYTES input. What TorchServe does not cover is tested against
the stand-in from the published OpenAPI (tests/client/test_v2_standin.py).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Iterator

import pytest

from mmsctl.client.contexts import Context
from mmsctl.client.v2 import V2Client
from mmsctl.errors import NotFoundError, UsageError
from tests.support.cli import run_mmsctl
from tests.support.refserver import wait_for_workers
from tests.support.torchserve import TorchServeInstance, build_noop_ts_mar, running_torchserve, ts_skip_reason

pytestmark = [pytest.mark.interop, pytest.mark.xdist_group("mms")]

#: Under kservev2 the handler gets the input dicts and answers one value per input (a str: BYTES).
KSERVE_ECHO = textwrap.dedent('''
    def handle(data, context):
        if not data:
            return None
        return ["echo:%s:%s" % (item.get("name"), item.get("data")) for item in data]
''')


@pytest.fixture(scope="module")
def ts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TorchServeInstance]:
    reason = ts_skip_reason()
    if reason:
        pytest.skip(reason)
    store = tmp_path_factory.mktemp("ts-v2-store")
    build_noop_ts_mar(store, "echo", handler_source=KSERVE_ECHO)
    with running_torchserve(tmp_path_factory.mktemp("ts-v2"), model_store=store, models={"echo": "echo.mar"},
                            extra_config={"service_envelope": "kservev2"}) as instance:
        wait_for_workers(instance, "echo", 1, headers=instance.management_headers())
        yield instance


def _ctx(ts: TorchServeInstance) -> Context:
    return Context("ts-v2", ts.inference_url, ts.inference_url, token_file=str(ts.key_file), protocol="v2")


@pytest.mark.slow
def test_client_infers_through_the_kservev2_envelope(ts: TorchServeInstance) -> None:
    with V2Client(_ctx(ts), timeout=60.0) as client:
        assert client.predict("echo", b"hello kserve").body == b"echo:data:hello kserve"
        with pytest.raises(NotFoundError):
            client.predict("nosuch", b"x")


def test_non_text_input_is_refused_in_one_line_where_only_json_is_read(ts: TorchServeInstance) -> None:
    with V2Client(_ctx(ts), timeout=60.0) as client, pytest.raises(UsageError, match="binary tensor data"):
        client.predict("echo", b"\xff\xd8\xff\xe0 a jpeg")


def test_cli_predict_on_a_torchserve_v2_context(ts: TorchServeInstance, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    added = run_mmsctl(capsys, "context", "add", "tsv2", "--inference", ts.inference_url, "--protocol", "v2",
                       "--token-file", str(ts.key_file))
    assert added.code == 0, added.stderr
    note = tmp_path / "note.txt"
    note.write_text("through predict --context")
    result = run_mmsctl(capsys, "--context", "tsv2", "predict", "echo", str(note))
    assert result.code == 0, result.stderr
    assert "echo:data:through predict --context" in result.stdout
    missing = run_mmsctl(capsys, "--context", "tsv2", "predict", "nosuch", str(note))
    assert missing.code == 3 and "Traceback" not in missing.stderr, missing.stderr
