"""``name=location``: one reading for predict, the server, the zoo and EC2 user data."""

from __future__ import annotations

from pathlib import Path

import pytest

from mmsctl.names import split_named


@pytest.mark.parametrize("text, expected", [
    ("squeezenet", (None, "squeezenet")),
    ("sq=squeezenet", ("sq", "squeezenet")),
    ("r18=https://example.com/resnet-18.mar?sig=a=b", ("r18", "https://example.com/resnet-18.mar?sig=a=b")),
    ("https://example.com/m.mar?x=1", (None, "https://example.com/m.mar?x=1")),  # a URL is never split
    ("v1.2_a-b=/models/x.mar", ("v1.2_a-b", "/models/x.mar")),
    ("./dir=x/m.mar", (None, "./dir=x/m.mar")),  # not a model name before '='
    ("=squeezenet", (None, "=squeezenet")),
    ("name=", (None, "name=")),
    ("a b=x", (None, "a b=x")),
])
def test_split_named(text: str, expected: tuple) -> None:
    assert split_named(text) == expected


def test_a_file_whose_name_holds_an_equals_sign_is_taken_as_it_is(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a=b.mar").write_bytes(b"")
    assert split_named("a=b.mar") == (None, "a=b.mar")
    assert split_named("a=c.mar") == ("a", "c.mar")
