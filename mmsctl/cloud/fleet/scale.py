"""``fleet scale``: set the Auto Scaling group's minimum, maximum and desired size."""

from __future__ import annotations

from typing import Any, Optional

from mmsctl.cloud.aws.errors import ResourceNotFound
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.fleet import asg
from mmsctl.cloud.fleet.query import find_resources
from mmsctl.errors import UsageError

__all__ = ["scale"]


def scale(aws: AwsSession, name: str, *, min_size: Optional[int] = None, max_size: Optional[int] = None,
          desired: Optional[int] = None) -> dict[str, Any]:
    """Change what was given; the rest stays. A desired size the new bounds exclude moves inside them.

    Raises:
        UsageError: nothing to change, or sizes that do not satisfy 0 <= min <= desired <= max <= 1000.
        ResourceNotFound: no such fleet (or it has no Auto Scaling group).
    """
    if min_size is None and max_size is None and desired is None:
        raise UsageError("nothing to change: give a min, max or desired size", params=("min_size", "max_size", "desired"))
    found = find_resources(aws, name)
    if found.group is None:
        raise ResourceNotFound(f"no fleet {name!r} in {aws.region}" + (
            f" (only: {found.summary()})" if found.any() else ""), hint="`mmsctl fleet list` shows the fleets")
    group = found.group
    before = {"min": int(group["MinSize"]), "desired": int(group["DesiredCapacity"]), "max": int(group["MaxSize"])}
    new_min = before["min"] if min_size is None else min_size
    new_max = before["max"] if max_size is None else max_size
    if desired is None:
        new_desired = min(max(before["desired"], new_min), new_max)
    else:
        new_desired = desired
    if not 0 <= new_min <= new_desired <= new_max <= asg.MAX_GROUP_SIZE:
        raise UsageError(f"sizes must satisfy 0 <= min ({new_min}) <= desired ({new_desired}) <= max ({new_max}) "
                         f"<= {asg.MAX_GROUP_SIZE}")
    after = {"min": new_min, "desired": new_desired, "max": new_max}
    if after != before:
        asg.set_size(aws, str(group["AutoScalingGroupName"]), min_size=new_min, max_size=new_max,
                     desired=new_desired)
    return {"name": name, "before": before, "after": after, "changed": after != before}
