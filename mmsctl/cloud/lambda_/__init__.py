"""``mmsctl lambda``'s control plane (the package is not called ``lambda``: a keyword).

    spec.py        names and the checked DeploySpec (no AWS call)
    policy.py      the least-privilege role, trust and repository policies
    resources.py   reading and tagging the resources of one deployment
    repository.py  the ECR repository, for build and deploy
    build.py       the image's build context and pushing it
    deploy/        deploy, one module per resource, and the orchestrator (deploy/run.py)
    query.py       list and describe
    invoke.py      invoke (synchronous, or through the S3 pipeline) and REPORT figures
    logs.py        the function's log events
    destroy.py     removing what deploy made, and only that

The contract with the handler (:mod:`mmsctl.lambda_`), the only modules here it imports:

    env.py         the ``MMSCTL_LAMBDA_*`` names and the handler's entry point
    events.py      event shapes: parsed by the handler, built by deploy, invoke and run-local
    outputs.py     the output objects' keys and bodies
    manifest.py    a build context's manifest: what the image is (read by run-local --build)
"""
