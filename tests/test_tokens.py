"""Token files fail closed: every shape that gives no usable key is an error, never 'no auth'."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mmsctl.errors import ConfigError, InputNotFoundError
from mmsctl.tokens import read_token, read_token_file


def _file(tmp_path: Path, content: str) -> Path:
    path = tmp_path / "token"
    path.write_text(content, encoding="utf-8")
    return path


def test_plain_token_serves_both_apis(tmp_path: Path) -> None:
    tf = read_token_file(_file(tmp_path, "  s3cret \nignored\n"))
    assert (tf.inference, tf.management) == ("s3cret", "s3cret")
    assert read_token(str(tf.path), "metrics") == "s3cret"


def test_torchserve_key_file_gives_each_api_its_key(tmp_path: Path) -> None:
    path = _file(tmp_path, json.dumps({"management": {"key": "M"}, "inference": {"key": "I"}, "API": {"key": "A"}}))
    assert (read_token(path, "management"), read_token(path, "inference"), read_token(path, "metrics")) == ("M", "I", "M")


def test_no_file_means_no_token() -> None:
    assert read_token(None, "inference") is None


@pytest.mark.parametrize("content, message", [
    ("", "is empty"),
    ("   \n\t\n", "is empty"),
    ("null", "expected a token or a JSON object"),
    ("[1]", "expected a token or a JSON object"),
    ("{}", "neither an 'inference' nor a 'management' key"),
    (json.dumps({"inference": None, "management": {"key": None}}), "neither"),
    (json.dumps({"inference": {"key": 5}}), "must be a string"),
    (json.dumps({"inference": {"key": ""}}), "empty or has characters"),
    ("tökén", "empty or has characters"),
    ("two words", "empty or has characters"),
    ("{broken", "not valid JSON"),
    ("[" * 60_000, "not valid JSON"),  # nested past Python's recursion limit
])
def test_unusable_files_are_errors(tmp_path: Path, content: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        read_token_file(_file(tmp_path, content))


def test_a_key_file_without_the_management_key_fails_for_management_only(tmp_path: Path) -> None:
    path = _file(tmp_path, json.dumps({"inference": {"key": "I"}}))
    assert read_token(path, "inference") == "I"
    with pytest.raises(ConfigError, match="no 'management' key"):
        read_token(path, "management")


def test_missing_binary_and_huge_files(tmp_path: Path) -> None:
    with pytest.raises(InputNotFoundError, match="not found"):  # exit 3, docs/cli.md
        read_token_file(tmp_path / "absent")
    binary = tmp_path / "bin"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_token_file(binary)
    huge = tmp_path / "huge"
    huge.write_bytes(b"a" * (65 * 1024))
    with pytest.raises(ConfigError, match="larger than"):
        read_token_file(huge)
