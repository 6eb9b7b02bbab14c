"""Every zoo module's public API is listed in a sorted ``__all__`` of names that exist."""

from __future__ import annotations

import importlib

import pytest

MODULES = [
    "mmsctl.zoo",
    "mmsctl.zoo.cache",
    "mmsctl.zoo.catalog",
    "mmsctl.zoo.download",
    "mmsctl.zoo.listing",
    "mmsctl.zoo.resolve",
    "mmsctl.zoo.untrained",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_and_complete(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported)
    for attr in exported:
        assert hasattr(module, attr), f"{name}.{attr}"


def test_the_agreed_interface() -> None:
    from mmsctl.zoo import ResolvedModel, resolve_model
    from mmsctl.zoo.untrained import build_checkpoint

    fields = ResolvedModel.__dataclass_fields__
    assert list(fields)[:3] == ["name", "path", "source"]
    assert callable(resolve_model) and callable(build_checkpoint)
