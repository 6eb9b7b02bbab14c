from __future__ import annotations

from typing import Iterator

import pytest

from mmsctl.client.contexts import Context
from tests.client.standin import StandIn, running_standin


@pytest.fixture
def standin(tmp_path) -> Iterator[StandIn]:
    with running_standin(StandIn()) as server:
        server.add_model("nin", 1)
        yield server


@pytest.fixture
def token_file(tmp_path, standin: StandIn):
    """A TorchServe-style key_file.json for the stand-in."""
    import json

    path = tmp_path / "key_file.json"
    path.write_text(json.dumps({
        "management": {"key": standin.management_key, "expiration time": "x"},
        "inference": {"key": standin.inference_key, "expiration time": "x"},
        "API": {"key": "api"},
    }))
    return path


@pytest.fixture
def context(standin: StandIn, token_file) -> Context:
    return Context("standin", standin.inference_url, standin.management_url, None, str(token_file))
