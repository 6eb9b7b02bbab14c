"""The manifest dataclass against model-archiver 1.0's layout and legacy MMS 0.4 manifests."""

from __future__ import annotations

import json

import pytest

from mmsctl.archive import Manifest, check_model_name, parse_manifest
from mmsctl.errors import ArchiveError, UsageError

# What `model-archiver --model-name noop --handler noop_service:handle` writes (plus optional keys).
MODEL_ARCHIVER_MANIFEST = {
    "runtime": "python",
    "model": {"modelName": "noop", "handler": "noop_service:handle", "modelVersion": "2.0",
              "description": "echo"},
    "engine": {"engineName": "MXNet", "engineVersion": "1.9.1"},
    "license": "Apache-2.0",
    "modelServerVersion": "1.0",
    "description": "an archive",
    "implementationVersion": "1.0",
    "specificationVersion": "1.0",
    "userData": {"team": "vision"},
    "publisher": {"author": "me", "email": "me@example.com"},
}

LEGACY_MANIFEST = {
    "Engine": {"MXNet": 1.2},
    "Model-Archive-Description": "squeezenet_v1.1",
    "License": "Apache 2.0",
    "Model-Archive-Version": 0.2,
    "Model-Server": 0.4,
    "Model": {
        "Description": "squeezenet_v1.1",
        "Service": "mxnet_vision_service.py",
        "Symbol": "squeezenet_v1.1-symbol.json",
        "Parameters": "squeezenet_v1.1-0000.params",
        "Signature": "signature.json",
        "Model-Name": "squeezenet_v1.1",
        "Model-Format": "MXNet-Symbolic",
    },
    "Created-By": {"Author": "MXNet SDK team", "Author-Email": "noreply@amazon.com"},
}


def test_round_trip_keeps_every_model_archiver_key() -> None:
    manifest = Manifest.from_dict(MODEL_ARCHIVER_MANIFEST)
    assert manifest.model_name == "noop"
    assert manifest.handler == "noop_service:handle"
    assert manifest.model_version == "2.0"
    assert manifest.engine_name == "MXNet"
    assert manifest.to_dict() == MODEL_ARCHIVER_MANIFEST


def test_unknown_keys_survive_a_round_trip() -> None:
    data = {"runtime": "python", "model": {"modelName": "a", "handler": "h", "custom": 1}, "archiverTool": "x"}
    assert Manifest.from_dict(data).to_dict() == data


def test_minimal_manifest_written_like_model_archiver() -> None:
    out = Manifest(model_name="squeezenet", handler="svc:handle").to_dict()
    assert out == {
        "runtime": "python",
        "model": {"modelName": "squeezenet", "handler": "svc:handle"},
        "modelServerVersion": "1.0",
        "implementationVersion": "1.0",
        "specificationVersion": "1.0",
    }


def test_legacy_manifest_is_normalised() -> None:
    manifest = parse_manifest(json.dumps(LEGACY_MANIFEST).encode())
    assert manifest.legacy is True
    assert manifest.model_name == "squeezenet_v1.1"
    assert manifest.handler == "mxnet_vision_service"
    assert manifest.model_version == "snapshot"
    assert manifest.engine == {"engineName": "MXNet", "engineVersion": "1.2"}
    assert manifest.publisher == {"author": "MXNet SDK team", "email": "noreply@amazon.com"}
    assert manifest.model_server_version == "0.4"
    assert manifest.legacy_model is not None and manifest.legacy_model["Symbol"] == "squeezenet_v1.1-symbol.json"


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"runtime": "python"}', "no 'model' section"),
        (b'{"model": {"handler": "x"}}', "no model name"),
        (b'{"Model": {"Service": "x.py"}}', "no model name"),
        (b"\xff\xfe", "not valid JSON"),
    ],
)
def test_bad_manifests_are_one_line_errors(raw: bytes, message: str) -> None:
    with pytest.raises(ArchiveError, match=message) as info:
        parse_manifest(raw)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["squeezenet", "resnet-18", "squeezenet_v1.1", "A1"])
def test_model_archiver_names_are_accepted(name: str) -> None:
    assert check_model_name(name) == name


@pytest.mark.parametrize("name", ["", "-x", ".hidden", "a b", "a/b", "ä"])
def test_names_model_archiver_refuses_are_refused(name: str) -> None:
    with pytest.raises(UsageError, match="invalid model name"):
        check_model_name(name)
