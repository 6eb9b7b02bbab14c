"""SageMaker's side of the image ``mmsctl lambda build`` makes, and running it locally.

In the image (``docker run IMAGE serve`` → ``python -m mmsctl.sagemaker serve``):

    serve.py      SageMaker's environment (``/opt/ml/model``, port 8080 or ``SAGEMAKER_BIND_TO_PORT``, workers,
                  timeout) as the embedded server's settings: the inference API alone (``/ping`` 503 until the
                  model is READY, ``/invocations`` on the lean path), no management or metrics API, SIGTERM
                  draining within SageMaker's 30 s before SIGKILL
    __main__.py   the entry: ``serve``, or a one-line refusal of anything else

On the user's machine (``mmsctl sagemaker run-local``):

    run_local.py  the model as SageMaker would see it (a ``model.tar.gz`` packed as ``sagemaker deploy`` packs it,
                  extracted into an ``/opt/ml/model``-shaped folder), and the ``serve`` entry run as its own
                  process with SageMaker's environment, without docker

The contract both sides share lives below, in :mod:`mmsctl.cloud.sagemaker.contract` (names of the
environment, the model folder, the port, the drain) and :mod:`mmsctl.cloud.lambda_.env` (the image's
entries); the model's packing is :mod:`mmsctl.cloud.sagemaker.model_data`'s. Nothing else of
:mod:`mmsctl.cloud` is imported here (``tests/test_layers.py`` checks).
"""
