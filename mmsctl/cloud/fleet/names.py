"""What each resource of fleet NAME is called (``mmsctl-fleet-NAME…``), and which names are allowed.

A load balancer's and a target group's names are at most 32 characters, so with
the ``mmsctl-fleet-`` prefix a fleet name has at most 19.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mmsctl.errors import UsageError

__all__ = ["IAM_PATH", "MAX_NAME", "FleetNames", "check_name"]

PREFIX = "mmsctl-fleet-"
MAX_NAME = 32 - len(PREFIX)
IAM_PATH = "/mmsctl-fleet/"
_NAME_RE = re.compile(rf"^[a-z0-9](?:[a-z0-9-]{{0,{MAX_NAME - 2}}}[a-z0-9])?$")


def check_name(name: str) -> str:
    """A fleet name: lowercase letters, digits and inner hyphens, 1 to 19 characters."""
    if not _NAME_RE.match(name or ""):
        raise UsageError(f"bad fleet name {name!r}: use 1 to {MAX_NAME} lowercase letters, digits and "
                         "hyphens (not at either end)",
                         hint="load balancer names are at most 32 characters, mmsctl-fleet- included")
    return name


@dataclass(frozen=True)
class FleetNames:
    """The names of one fleet's resources (every one also carries the ``mmsctl:fleet`` tag)."""

    fleet: str

    @property
    def base(self) -> str:
        return PREFIX + self.fleet

    @property
    def load_balancer(self) -> str:
        return self.base

    @property
    def target_group(self) -> str:
        return self.base

    @property
    def auto_scaling_group(self) -> str:
        return self.base

    @property
    def group_names(self) -> tuple[str, str]:
        """The two names a blue/green rollout alternates between: the group serving and the one replacing it."""
        return self.base, self.base + "-green"

    def other_group(self, current: str) -> str:
        blue, green = self.group_names
        return green if current == blue else blue

    @property
    def launch_template(self) -> str:
        return self.base

    @property
    def asset_prefix(self) -> str:
        """Where the members find their assets in the account's asset bucket."""
        return f"fleet/{self.fleet}/"

    @property
    def role(self) -> str:
        return self.base

    @property
    def instance_profile(self) -> str:
        return self.base

    @property
    def policy(self) -> str:
        return self.base + "-requests"

    @property
    def lb_group(self) -> str:
        return self.base + "-lb"

    @property
    def instance_group(self) -> str:
        return self.base + "-instances"

    @property
    def admin_group(self) -> str:
        return self.base + "-admin"
