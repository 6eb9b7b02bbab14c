"""``mmsctl sagemaker deploy``: create or update, idempotently, everything one endpoint needs.

One module per resource, each a step that reads what exists first and changes only what differs, so a
second deploy with the same flags makes no change; :mod:`.run` calls them in order. Every resource carries
``mmsctl:sagemaker=NAME``; the spec was checked (:mod:`mmsctl.cloud.sagemaker.spec`) before the first call.

    target.py       the endpoint being deployed (account, ARNs, tags) and the report of changes
    image.py        the ECR image, found and pinned to its digest (missing: refused before any change)
    model_data.py   model.tar.gz in the account's asset bucket (uploaded when its sha256 changed), or yours
    role.py         the least-privilege execution role
    log_group.py    the log group SageMaker writes the containers' output to, and its retention
    model.py        the model (CreateModel): image, model data, environment, role
    config.py       the endpoint configuration: one variant, real-time or serverless
    endpoint.py     the endpoint created, or moved to the new configuration (UpdateEndpoint), and the wait
                    for InService with progress
    scaling.py      target tracking on invocations per instance (Application Auto Scaling)
    run.py          ``deploy()``: the steps in order, and its result
"""
