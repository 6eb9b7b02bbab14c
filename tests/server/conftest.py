"""One shared server per module for the API tests (starting one costs about a second)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest

from tests.support.mmsctl_server import ServerInfo, make_handler_archive, make_noop_archive, running_mmsctl_server

#: A handler that answers as the request's body asks: a 204 or 304 with a body, a 101, a status that is a str
#: ("str404": MMS's worker could not send it), or framing and connection headers of its own (which the server
#: writes itself).
FRAMING_HANDLER = '''
def handle(data, context):
    if data is None:
        return None
    asked = data[0].get("body") or data[0].get("data") or b""
    asked = asked.decode() if isinstance(asked, (bytes, bytearray)) else str(asked)
    if asked in ("101", "204", "304"):
        context.set_response_status(int(asked), "")
        return [None]
    if asked == "str404":
        context.set_response_status("404", "Not Found")
        return ["not found"]
    for key, value in (("Content-Length", "1"), ("Transfer-Encoding", "chunked"), ("Connection", "close"),
                       ("Keep-Alive", "timeout=1"), ("Upgrade", "h2c"), ("Trailer", "X-T"), ("Date", "yesterday"),
                       ("x-request-id", "mine"), ("Content-Type", "text/plain"), ("X-Kept", "yes")):
        context.set_response_header(0, key, value)
    return ["hello"]
'''


@pytest.fixture(scope="module")
def model_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("store")
    make_noop_archive(store / "noop")
    make_noop_archive(store / "echo", name="echo")
    make_noop_archive(store / "broken", name="broken", failing=True)
    make_handler_archive(store / "framing", FRAMING_HANDLER, name="framing")
    return store


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, model_store: Path) -> Iterator[ServerInfo]:
    with running_mmsctl_server(
        tmp_path_factory.mktemp("srv"), model_store=model_store, models={"noop": "noop"}, workers=1,
        extra_config={"max_request_size": 100_000},
    ) as info:
        yield info
