"""``mmsctl ec2``: model servers on single EC2 instances mmsctl launches and tags.

    spec.py      what launch is asked for and what it made (plain data)
    launch.py    finding or creating the network, groups and EI resources, then RunInstances
    query.py     list, describe, the waiters, ssh config entries
    destroy.py   terminate, and cleanup of the shared resources launch made

Every function takes an :class:`~mmsctl.cloud.aws.session.AwsSession` and returns plain data; the CLI
(``mmsctl/cli/ec2.py``) renders it. What the instance boots is shared with fleets (:mod:`mmsctl.cloud.instance`).
"""
