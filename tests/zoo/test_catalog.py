"""The MMS model-zoo table: names, aliases, URLs, did-you-mean."""

from __future__ import annotations

import pytest

from mmsctl.errors import ModelNotFoundError
from mmsctl.zoo.catalog import CATALOG, ZOO_BASE_URL, find_entry, lookup, suggest


@pytest.mark.parametrize(
    ("typed", "canonical"),
    [
        ("squeezenet", "squeezenet_v1.1"),
        ("SqueezeNet_V1.1", "squeezenet_v1.1"),
        ("resnet-18", "resnet-18"),
        ("RESNET18", "resnet-18"),
        ("mobilenet", "onnx-mobilenet"),  # the name MMS's docs register it under
        ("inception-bn", "inception-bn"),
        ("ssd", "resnet50_ssd"),
        ("ferplus", "FERPlus"),
        ("  nin ", "nin"),
    ],
)
def test_names_and_aliases_resolve_case_insensitively(typed: str, canonical: str) -> None:
    entry = lookup(typed)
    assert entry is not None and entry.name == canonical


def test_urls_follow_the_mms_zoo_layout() -> None:
    squeezenet = find_entry("squeezenet")
    assert squeezenet.url == "https://s3.amazonaws.com/model-server/model_archive_1.0/squeezenet_v1.1.mar"
    assert find_entry("onnx-squeezenet").url == ZOO_BASE_URL + "onnx-squeezenet.mar"
    caffenet = find_entry("caffenet")
    assert caffenet.url == ZOO_BASE_URL + "caffenet/caffenet.mar"
    assert caffenet.filename == "caffenet.mar"
    for entry in CATALOG:
        assert entry.url.startswith(ZOO_BASE_URL) and entry.url.endswith(".mar")


def test_catalog_covers_the_documented_models() -> None:
    names = {e.name for e in CATALOG}
    for expected in ("squeezenet_v1.1", "resnet-18", "resnet-152", "nin", "vgg16", "vgg19",
                     "inception-bn", "caffenet", "alexnet", "lstm_ptb", "onnx-squeezenet",
                     "onnx-resnet50v2", "onnx-vgg19_bn", "resnet50_ssd", "crepe"):
        assert expected in names
    assert len({e.name.casefold() for e in CATALOG}) == len(CATALOG)


def test_did_you_mean_for_typos() -> None:
    assert suggest("squeezent")[0] == "squeezenet"  # the spelling closest to what was typed
    assert suggest("squeeznet")[:2] == ["squeezenet", "onnx-squeezenet"]
    assert "resnet-18" in suggest("resnet-19")
    assert suggest("completely-different") == []
    with pytest.raises(ModelNotFoundError) as info:
        find_entry("squeezent")
    assert "did you mean 'squeezenet'" in info.value.message
    assert "\n" not in info.value.message
