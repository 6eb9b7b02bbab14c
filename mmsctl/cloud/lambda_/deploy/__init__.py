"""``mmsctl lambda deploy``: create or update, idempotently, everything one function needs.

One module per resource, each a step that first reads what exists and changes only what
differs, so a second deploy with the same flags makes no change; :mod:`.run` calls them in
order. Every resource carries ``mmsctl:lambda=NAME``; the spec was checked
(:mod:`mmsctl.cloud.lambda_.spec`) before the first call.

    target.py       the function being deployed (ARNs, alias, tags) and the report of changes
    image.py        the ECR repository and the image, pinned to its digest
    buckets.py      the model, input and output buckets (private, tagged)
    model.py        the archive uploaded to the model bucket (versioned; the function pins the version)
    role.py         the least-privilege execution role
    log_group.py    the log group and its retention
    function.py     the function (image package): created, or its code, configuration and tags updated
    alias.py        the ``live`` alias and provisioned concurrency
    permissions.py  the function's resource policy: one statement per caller, stale ones dropped
    url.py          the function URL (IAM or public)
    triggers.py     the S3 trigger: permission, then the bucket notification with suffix filters
    schedule.py     the keep-warm EventBridge rule and its target
    run.py          ``deploy()``: the steps in order, and its result
"""
