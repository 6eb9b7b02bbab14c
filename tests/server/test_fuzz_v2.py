"""The v2 (Open Inference Protocol) API fuzzed from the OpenAPI document the server publishes for it
(``GET /v2/api-description``), as ``test_fuzz.py`` fuzzes MMS's: no generated request gets a 5xx, and
every 4xx carries the protocol's ``{"error": "..."}`` body, which never names a Python exception."""

from __future__ import annotations

from typing import Any, Iterator

import httpx
import pytest
import schemathesis

from tests.server.test_fuzz import ECHO_HANDLER, FUZZ
from tests.support.leaks import LEAK
from tests.support.mmsctl_server import ServerInfo, make_handler_archive, running_mmsctl_server


@pytest.fixture(scope="module")
def fuzzed_v2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerInfo]:
    store = tmp_path_factory.mktemp("store")
    make_handler_archive(store / "echo", ECHO_HANDLER, name="echo")
    with running_mmsctl_server(tmp_path_factory.mktemp("srv"), model_store=store, models={"echo": "echo"},
                               extra_config={"worker_limit": 3, "max_request_size": 100_000}) as info:
        yield info


@pytest.fixture(scope="module")
def v2_schema(fuzzed_v2: ServerInfo) -> Any:
    document = httpx.get(fuzzed_v2.inference_url + "/v2/api-description", timeout=10).json()
    return schemathesis.openapi.from_dict(document)


v2 = schemathesis.pytest.from_fixture("v2_schema")


@v2.parametrize()
@FUZZ
@pytest.mark.slow
def test_the_v2_api_never_answers_5xx(case: Any, fuzzed_v2: ServerInfo) -> None:
    response = case.call(base_url=fuzzed_v2.inference_url, timeout=30)
    assert response.status_code < 500, (case.method, case.formatted_path, case.headers, response.text[:500])
    if response.status_code >= 400:
        assert set(response.json()) == {"error"}, response.text[:300]
        assert not LEAK.search(response.json()["error"]), response.text[:300]


def test_the_document_lists_every_v2_route(fuzzed_v2: ServerInfo) -> None:
    paths = httpx.get(fuzzed_v2.inference_url + "/v2/api-description", timeout=10).json()["paths"]
    assert {"/v2", "/v2/health/live", "/v2/health/ready", "/v2/models/{model_name}/infer",
            "/v2/models/{model_name}/versions/{model_version}/ready", "/v2/models/echo/infer"} <= set(paths)
