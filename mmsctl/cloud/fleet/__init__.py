"""``mmsctl fleet``: model servers on EC2 Auto Scaling behind an Application Load Balancer.

    names.py     what each resource of fleet NAME is called, and the name rules
    create.py    the resource graph, in dependency order (``fleet create``)
    query.py     finding a fleet's resources: list, describe, members, health and the waiter
    scale.py     resizing the Auto Scaling group
    destroy.py   removing everything ``create`` made, in reverse order, idempotently
    elb.py       the Application Load Balancer, its listeners and target group
    asg.py       the Auto Scaling group and its request-tracking policy

Every function takes an :class:`~mmsctl.cloud.aws.session.AwsSession` and returns
plain data; the CLI (``mmsctl/cli/fleet/``) renders it.
"""
