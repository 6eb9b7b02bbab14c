"""Both HTTP APIs fuzzed from the OpenAPI documents the server itself publishes (``OPTIONS /``).

schemathesis generates requests for every operation (paths, query parameters, bodies; valid
and invalid), with a fixed seed and a bounded number of examples each. No request may get a
5xx: whatever a client sends is answered with a 2xx, a 4xx and MMS's error body, never a crash,
and no error body names a Python exception (``tests/support/leaks.py``).
"""

from __future__ import annotations

from typing import Any, Iterator

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from mmsctl.server.errors import INTERNAL_ERROR
from mmsctl.server.http.replies import error_reply
from tests.support.error_bodies import is_error_body
from tests.support.leaks import LEAK
from tests.support.mmsctl_server import ServerInfo, make_handler_archive, running_mmsctl_server

ECHO_HANDLER = '''
def handle(data, context):
    if data is None:
        return None
    return [str(sorted(row)) for row in data]
'''

#: Examples per operation: enough to reach the error paths, few enough to stay well under a minute.
EXAMPLES = 25
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    store = tmp_path_factory.mktemp("store")
    make_handler_archive(store / "echo", ECHO_HANDLER, name="echo")
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), model_store=store, models={"echo": "echo"},
                               extra_config={"worker_limit": 3, "max_request_size": 100_000}) as info:
        yield info


def _schema(url: str) -> Any:
    document = httpx.request("OPTIONS", url + "/", timeout=10).json()
    return schemathesis.openapi.from_dict(document)


@pytest.fixture(scope="module")
def inference_schema(fuzzed: ServerInfo) -> Any:
    return _schema(fuzzed.inference_url)


@pytest.fixture(scope="module")
def management_schema(fuzzed: ServerInfo) -> Any:
    return _schema(fuzzed.management_url)


def _no_server_error(case: Any, base_url: str) -> None:
    response = case.call(base_url=base_url, timeout=30)
    assert response.status_code < 500, (case.method, case.formatted_path, case.query, response.text[:500])
    if response.status_code >= 400:
        body = response.json()
        assert is_error_body(body) and body["code"] == response.status_code, body
        assert not LEAK.search(body["message"]), body


inference = schemathesis.pytest.from_fixture("inference_schema")
management = schemathesis.pytest.from_fixture("management_schema")


@inference.parametrize()
@FUZZ
@pytest.mark.slow
def test_the_inference_api_never_answers_5xx(case: Any, fuzzed: ServerInfo) -> None:
    _no_server_error(case, fuzzed.inference_url)


@management.parametrize()
@FUZZ
@pytest.mark.slow
def test_the_management_api_never_answers_5xx(case: Any, fuzzed: ServerInfo) -> None:
    _no_server_error(case, fuzzed.management_url)



def test_an_unexpected_error_is_a_500_that_names_neither_the_exception_nor_its_text() -> None:
    """What the middleware answers for an exception no check foresaw (the log keeps the traceback)."""
    import json

    response = error_reply(KeyError("/srv/secret/path"), 1000)
    body = json.loads(response.body)
    assert (response.status, body) == (500, {"code": 500, "type": "InternalServerException", "message": INTERNAL_ERROR})
    assert not LEAK.search(INTERNAL_ERROR)
