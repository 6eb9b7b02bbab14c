"""Where the handler writes an S3 event's answer, and what the object holds.

The handler writes these objects; ``mmsctl lambda invoke --s3`` finds and reads them:
one naming for both sides. For the input ``s3://IN/<input prefix><rest>`` the answer is
``s3://OUT/<output prefix><rest>.json``; a bad input (not an image, empty, too large)
gets ``<output prefix><rest>.error.json`` instead, holding MMS's error body, so a
pipeline can list failures without reading logs. Keys longer than S3's 1024 bytes
fall back to a hash of the input key.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any, Optional

from mmsctl.cloud.lambda_.events import S3Object
from mmsctl.error_body import ErrorBody

__all__ = ["ERROR_SUFFIX", "OUTPUT_SUFFIX", "error_document", "output_key", "result_document"]

OUTPUT_SUFFIX = ".json"
ERROR_SUFFIX = ".error.json"
_MAX_KEY_BYTES = 1024


def output_key(key: str, *, input_prefix: str = "", output_prefix: str = "", error: bool = False) -> str:
    """The output object's key for input object *key*."""
    rest = key[len(input_prefix):] if input_prefix and key.startswith(input_prefix) else key
    suffix = ERROR_SUFFIX if error else OUTPUT_SUFFIX
    name = f"{output_prefix}{rest}{suffix}"
    if len(name.encode("utf-8")) > _MAX_KEY_BYTES:
        name = f"{output_prefix}{hashlib.sha256(key.encode('utf-8')).hexdigest()}{suffix}"
    return name


def _input(obj: S3Object) -> dict[str, Any]:
    data: dict[str, Any] = {"bucket": obj.bucket, "key": obj.key}
    for name, value in (("version_id", obj.version_id), ("size", obj.size), ("etag", obj.etag)):
        if value is not None:
            data[name] = value
    return data


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def result_document(obj: S3Object, *, model: str, result: Any, duration_ms: float) -> bytes:
    """The output object for a prediction: the input, the model and the handler's answer as it is."""
    return _dump({"input": _input(obj), "model": model, "status": 200, "result": result,
                  "duration_ms": round(duration_ms, 2), "created": _now()})


def error_document(obj: S3Object, *, model: str, code: int, type: str, message: str,
                   request_id: Optional[str] = None) -> bytes:
    """The error object: MMS's error body ``{"code", "type", "message"}`` plus where it came from."""
    doc: dict[str, Any] = {"input": _input(obj), "model": model, "status": code,
                           "error": ErrorBody(code, type, message).to_dict(), "created": _now()}
    if request_id:
        doc["request_id"] = request_id
    return _dump(doc)


def _dump(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, indent=2).encode("utf-8")
