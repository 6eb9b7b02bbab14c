"""The code that runs inside an AWS Lambda container image built by ``mmsctl lambda build``.

    handler.py    module scope: settings, model load (once per container); ``handler(event, context)``
    runtime.py    one invocation: which event it is, predict, answer or write the output object
    events.py     the event shapes Lambda delivers (S3 put, function URL v2, API Gateway v1, schedules)
    outputs.py    output-object names and bodies in the output bucket (predictions and error objects)
    model.py      the model: baked into the image or downloaded from S3; predictions via mmsctl's predict core
    fetch.py      bounded download of ``?url=`` images
    settings.py   the ``MMSCTL_LAMBDA_*`` environment the handler reads (set by the image and by deploy)
    local.py      ``mmsctl lambda run-local``: the same handler in-process, and a local Invoke API
    prepare.py    the build-time step of the Dockerfile: compile mxnet's wrappers, load the model once

Nothing here imports the CLI or the control plane (``mmsctl.cloud.lambda_*``); the control
plane imports :mod:`mmsctl.serverless.settings` for the names of the variables it sets.
"""
