"""`mmsctl fleet`: model servers on EC2 Auto Scaling behind an Application Load Balancer."""

from mmsctl.cli.fleet.commands import register

__all__ = ["register"]
