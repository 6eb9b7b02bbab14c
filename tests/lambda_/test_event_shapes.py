"""Event shapes are checked once, by type, with the offending field's path; the parser never raises.

Lambda counts an exception from the handler as a failed invocation and retries the same event
(twice more for S3's asynchronous calls), so a malformed event must become an answer, not a
traceback. The documented samples are mutated field by field with every JSON type.
"""

from __future__ import annotations

import copy
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmsctl.cloud.lambda_.events import HttpRequest, S3Put, Unknown, parse_event
from tests.lambda_.conftest import sample

SAMPLES = ["s3_put.json", "function_url_post.json", "apigateway_proxy.json", "scheduled.json"]


@pytest.mark.parametrize("event, path", [
    ({"Records": [{"eventSource": "aws:s3", "s3": "x"}]}, "Records[0].s3"),
    ({"Records": [{"eventSource": "aws:s3", "s3": {"bucket": {"name": "b"}, "object": "k.jpg"}}]},
     "Records[0].s3.object"),
    ({"version": "2.0", "requestContext": {"http": "GET"}}, "requestContext.http"),
    ({"Records": "all of them"}, "Records"),
    ({"Records": [{"eventSource": "aws:s3", "s3": {"bucket": {"name": 7}, "object": {"key": "k"}}}]},
     "Records[0].s3.bucket.name"),
    ({"source": "aws.s3", "detail-type": "Object Created", "detail": ["x"]}, "detail"),
    ({"httpMethod": "GET", "queryStringParameters": "url=x"}, "queryStringParameters"),
    ({"url": "https://example.com/a.jpg", "topk": {"n": 3}}, "topk"),
])
def test_the_events_that_raised_are_unknown_with_their_path(event: dict[str, Any], path: str) -> None:
    parsed = parse_event(event)
    assert isinstance(parsed, Unknown)
    assert parsed.path == path and parsed.reason.startswith(f"malformed event: {path} is ")


def test_the_documented_events_still_parse() -> None:
    s3 = parse_event(sample("s3_put.json"))
    assert isinstance(s3, S3Put) and s3.records[0].bucket and s3.records[0].key
    assert isinstance(parse_event(sample("function_url_post.json")), HttpRequest)
    assert isinstance(parse_event(sample("apigateway_proxy.json")), HttpRequest)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON document that a value stands at."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield prefix + (key,)
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield prefix + (index,)
            yield from _paths(item, prefix + (index,))


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
                     max_leaves=6)


@settings(max_examples=400, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(SAMPLES), data=st.data(), value=_JSON)
def test_any_field_of_any_type_never_raises(name: str, data: st.DataObject, value: Any) -> None:
    event = sample(name)
    place = data.draw(st.sampled_from(list(_paths(event))))
    mutated = copy.deepcopy(event)
    holder = mutated
    for step in place[:-1]:
        holder = holder[step]
    holder[place[-1]] = value
    parsed = parse_event(mutated)  # must not raise, whatever stands there
    if isinstance(parsed, Unknown) and parsed.reason.startswith("malformed event: "):
        assert parsed.path and parsed.reason.startswith(f"malformed event: {parsed.path} is ")


@settings(max_examples=200, derandomize=True, deadline=None)
@given(_JSON)
def test_any_json_document_never_raises(value: Any) -> None:
    parse_event(value)
