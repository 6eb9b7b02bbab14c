"""The one MMS error-body builder and parser agree with each other and with MMS's shape."""

from __future__ import annotations

import json

from mmsctl.error_body import ErrorBody, error_body, parse_error_body


def test_built_body_has_mms_fields_and_parses_back() -> None:
    raw = error_body(404, "ModelNotFoundException", "Model not found: x")
    assert json.loads(raw) == {"code": 404, "type": "ModelNotFoundException", "message": "Model not found: x"}
    assert raw.endswith(b"\n") and b'\n  "code"' in raw  # MMS pretty-prints with two spaces
    assert parse_error_body(raw) == ("ModelNotFoundException", "Model not found: x")
    assert ErrorBody(503, "ServiceUnavailableException", "é").encode().decode("utf-8").count("é") == 1


def test_parser_accepts_status_bodies_text_and_garbage() -> None:
    assert parse_error_body(b'{"status": "Healthy"}') == (None, "Healthy")
    assert parse_error_body(b"upstream timed out\n") == (None, "upstream timed out")
    assert parse_error_body(b"x" * 1000)[1] == "x" * 300
    assert parse_error_body(b"[1, 2]") == (None, None)
    assert parse_error_body(b"") == (None, None)
    assert parse_error_body(b"\xff\xfe") == (None, "\ufffd\ufffd")
    assert parse_error_body(b"[" * 100_000) == (None, "[" * 300)  # too deep for the JSON parser: text


def test_a_cause_is_a_fourth_key_that_parses_after_the_message() -> None:
    raw = error_body(500, "InternalServerException", "Failed to start workers", 'model "m": no weights')
    assert json.loads(raw) == {"code": 500, "type": "InternalServerException", "message": "Failed to start workers",
                               "cause": 'model "m": no weights'}
    assert parse_error_body(raw) == ("InternalServerException", 'Failed to start workers: model "m": no weights')
    assert "cause" not in json.loads(error_body(404, "ModelNotFoundException", "x"))
