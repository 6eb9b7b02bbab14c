"""The Lambda entry point the image's ``CMD`` names: ``mmsctl.lambda_.handler.handler``.

Module scope is Lambda's init phase, once per container: it reads the
``MMSCTL_LAMBDA_*`` settings, imports mxnet and loads the model (from the image or
from S3). Each invocation then only predicts. ``mmsctl lambda run-local`` imports
this very module, so what runs on a laptop is what runs in Lambda.
"""

from __future__ import annotations

import logging
from typing import Any

from mmsctl.lambda_.runtime import Runtime

__all__ = ["RUNTIME", "handler"]

# Lambda's Python runtime logs WARNING and above unless told otherwise; one INFO line per input is wanted.
logging.getLogger("mmsctl.lambda").setLevel(logging.INFO)

#: Loaded once per container: the cold start is this line.
RUNTIME = Runtime.from_environ()


def handler(event: Any, context: Any) -> Any:
    """Answer one event: an S3 notification, a function-URL / API Gateway request, or the keep-warm call."""
    return RUNTIME.handle(event, context)
