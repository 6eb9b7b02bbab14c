"""AWS plumbing every product shares; nothing here knows EC2 instances, fleets or Lambda functions.

    session.py          the one door to boto3 and botocore: clients, the call log, dry runs, error translation
    errors.py           the AWS failures users hit, each a one-line CloudError (botocore's types come via session)
    dryrun.py           what a dry run records, and the placeholders it answers with
    tags.py             the ``mmsctl:*`` tags on everything mmsctl creates (EC2, fleets, Lambda)
    iam.py              instance roles and profiles
    network.py          VPC and subnet choice
    security_groups.py  groups and their rules
    made.py             one line of what a command created that also names the resource (``Made``)
    undo.py             delete what a command made when a later step of it fails
    prices.py           bundled prices (``prices.json``), the Pricing API, cost per 100k requests
"""
