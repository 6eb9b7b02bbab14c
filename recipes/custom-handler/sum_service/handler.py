"""A custom MMS 1.x handler: add up the numbers in each request and answer JSON.

The MMS handler contract, nothing mmsctl-specific, so the same archive serves in
`mmsctl serve`, `mmsctl predict` and real MMS 1.1 (`multi-model-server`):

- ``handle(None, context)`` is called once when a worker loads the model;
- ``handle(data, context)`` is called per batch: ``data`` has one dict per request,
  the request body under ``"body"`` (or ``"data"`` for a form field of that name).
  ``application/json`` bodies arrive parsed, ``text/*`` as ``str``, anything else as
  ``bytearray``; the handler accepts all three.
- it returns one answer per request; ``context.set_response_content_type(idx, ...)``
  and ``context.set_response_status(code, phrase, idx)`` set each answer's headers.

Accepted bodies: ``{"numbers": [1, 2.5]}``, ``[1, 2.5]``, or text such as ``1 2.5`` / ``1,2.5``.
"""

import json
import logging
import os

log = logging.getLogger(__name__)

# Read from settings.json (packed with --extra-files) when the worker loads the model.
_settings = {"round_digits": 6, "max_numbers": 100000}


def _initialize(context):
    model_dir = context.system_properties.get("model_dir") or "."
    path = os.path.join(model_dir, "settings.json")
    if os.path.exists(path):
        with open(path) as fh:
            _settings.update(json.load(fh))
    log.info("sum service %s ready: %s", context.model_name, _settings)


def _number(token):
    try:
        return float(token)
    except ValueError:
        raise ValueError("not a number: %r" % (token,)) from None


def _numbers(payload):
    """The list of numbers in one request body; ValueError says what is wrong."""
    if isinstance(payload, (bytes, bytearray)):
        payload = bytes(payload).decode("utf-8")
    if isinstance(payload, str):
        text = payload.strip()
        if text[:1] in ("[", "{"):
            payload = json.loads(text)
        else:
            payload = [_number(tok) for tok in text.replace(",", " ").split()]
    if isinstance(payload, dict):
        payload = payload.get("numbers")
    if not isinstance(payload, list):
        raise ValueError('send {"numbers": [...]}, a JSON list, or numbers as text')
    if len(payload) > _settings["max_numbers"]:
        raise ValueError("at most %d numbers per request" % _settings["max_numbers"])
    out = []
    for value in payload:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError("not a number: %r" % (value,))
        out.append(value)
    return out


def handle(data, context):
    if data is None:  # load time
        _initialize(context)
        return None
    answers = []
    for idx, request in enumerate(data):
        payload = request.get("body")
        if payload is None:
            payload = request.get("data")
        context.set_response_content_type(idx, "application/json")
        try:
            numbers = _numbers(payload if payload is not None else "")
        except ValueError as exc:
            context.set_response_status(400, "Bad Request", idx)
            answers.append({"code": 400, "type": "BadRequestException", "message": str(exc)})
            continue
        total = round(sum(numbers), _settings["round_digits"])
        answers.append({"sum": total, "count": len(numbers)})
    return answers
