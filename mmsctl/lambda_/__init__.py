"""The handler inside an AWS Lambda container image built by ``mmsctl lambda build``, and running it locally.

In the image (Lambda imports ``mmsctl.lambda_.handler``):

    handler.py    module scope: settings, model load (once per container); ``handler(event, context)``
    runtime.py    one invocation: which event it is, predict, answer or write the output object
    served_model.py  the model: baked into the image or downloaded from S3, opened and run through the
                  predict core (:mod:`mmsctl.predict`), as ``mmsctl predict`` runs it
    settings.py   the ``MMSCTL_LAMBDA_*`` environment, read and checked once per container
    prepare.py    the build-time step of the Dockerfile: compile mxnet's wrappers, load the model once

On the user's machine (``mmsctl lambda run-local``):

    local.py      the handler as Lambda loads and calls it (init, context, REPORT figures), and a
                  local Invoke API; ``python -m mmsctl.lambda_.local`` for a build context's code
    run_local.py  the deployed function's environment (or --model / --build), the event, the run

It sits above the predict core and the control plane: the contract both sides share
lives below it, in :mod:`mmsctl.cloud.lambda_` (``env``: variable names and the handler's
entry point; ``events``: event shapes, parsed and built; ``outputs``: output objects;
``manifest``: what a build context's image is), and the handler reaches S3 through
:mod:`mmsctl.cloud.aws.session` / :mod:`mmsctl.cloud.aws.errors`. Nothing else of
:mod:`mmsctl.cloud` is imported here (``tests/test_layers.py`` checks), and nothing in
:mod:`mmsctl.cloud` imports this package.
"""
