"""A function URL's base64 body (a phone photo's 4 MB): decoded by pybase64, refused as the standard library would."""

from __future__ import annotations

import os

from mmsctl.cloud.lambda_ import events
from mmsctl.cloud.lambda_.events import HttpRequest, function_url_event, parse_event


def test_base64_bodies_decode_and_bad_ones_are_refused() -> None:
    assert events._fast64.__name__ == "pybase64"  # the declared dependency, not the fallback
    photo = os.urandom(3 * 2**20 + 1)  # not a multiple of 3: the encoding ends in padding
    good = parse_event(function_url_event("POST", body=photo, content_type="image/jpeg"))
    assert isinstance(good, HttpRequest) and good.body == photo and good.body_error is None
    for bad in ("QUJD\n", "QU JD", "QUI", "Q=JD", "Ab€d", "QUJD" * 1000 + "!"):
        event = function_url_event("POST", body=b"x", content_type="image/jpeg")
        event["body"] = bad
        parsed = parse_event(event)
        assert isinstance(parsed, HttpRequest) and parsed.body is None, bad
        assert parsed.body_error == "the request body is marked base64 but is not", bad
