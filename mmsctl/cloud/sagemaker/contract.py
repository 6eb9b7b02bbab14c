"""SageMaker's container contract, by name: what ``sagemaker deploy`` sets on a model and the image's ``serve``
entry (:mod:`mmsctl.sagemaker`) reads.

SageMaker runs ``docker run IMAGE serve`` (the image's exec-form ENTRYPOINT, as root), extracts the model's
``ModelDataUrl`` (a ``model.tar.gz``) into ``/opt/ml/model``, and talks to port 8080 (``SAGEMAKER_BIND_TO_PORT``
when it sets one): ``GET /ping`` must answer 200 within 2 s once the model is ready, ``POST /invocations``
carries the request's own ``Content-Type`` and ``Accept``, and on scale-in or update the container gets SIGTERM,
then SIGKILL 30 s later ("Use Your Own Inference Code with Hosting Services", SageMaker developer guide).
"""

from __future__ import annotations

__all__ = [
    "DRAIN_S",
    "ENV_DRAIN",
    "ENV_HOST",
    "ENV_MODEL_DIR",
    "ENV_PORT",
    "ENV_TIMEOUT",
    "ENV_WORKERS",
    "MAX_TIMEOUT_S",
    "MAX_WORKERS",
    "MODEL_DIR",
    "PORT",
    "SERVE",
]

#: The argument SageMaker runs the image with.
SERVE = "serve"
#: Where SageMaker extracts ``model.tar.gz``.
MODEL_DIR = "/opt/ml/model"
PORT = 8080
#: The port SageMaker asks for instead of 8080 (inference pipelines, multi-container endpoints).
ENV_PORT = "SAGEMAKER_BIND_TO_PORT"
#: Worker processes of the model (SageMaker's inference toolkits read the same name); default one per CPU.
ENV_WORKERS = "SAGEMAKER_MODEL_SERVER_WORKERS"
#: Seconds one batch may take before its worker is replaced (the toolkits' name too); SageMaker's own
#: invocation timeout is 60 s.
ENV_TIMEOUT = "SAGEMAKER_MODEL_SERVER_TIMEOUT"
#: mmsctl's own: the folder that stands for ``/opt/ml/model`` (``sagemaker run-local``), and the address to
#: bind (``0.0.0.0`` in SageMaker: its front end connects from outside the container; run-local: loopback).
ENV_MODEL_DIR = "MMSCTL_SAGEMAKER_MODEL_DIR"
ENV_HOST = "MMSCTL_SAGEMAKER_HOST"
#: Ceilings of the numbers the environment sets.
MAX_WORKERS = 64
MAX_TIMEOUT_S = 3600
#: Seconds SIGTERM drains in-flight and queued invocations for: inside SageMaker's 30 s before SIGKILL,
#: with time left to send the answers and stop the workers.
DRAIN_S = 25.0
#: mmsctl's own: a shorter drain than DRAIN_S (whole seconds, 1 to DRAIN_S), for a platform that kills sooner, or
#: a test; never a longer one.
ENV_DRAIN = "MMSCTL_SAGEMAKER_DRAIN_TIMEOUT"
