"""The line `ec2 cost` and `fleet cost` add under their table when a price is not the region's own."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Optional

from mmsctl.cli.render import get_ui

__all__ = ["note_bundled_price"]

_BUNDLED = "bundled us-east-1"


def note_bundled_price(sources: Iterable[str], region: Optional[str], *, live: bool) -> None:
    """Warn on stderr when a row's price is the bundled us-east-1 one while the user works in another region
    (``--region``, else ``AWS_REGION``/``AWS_DEFAULT_REGION``): the table alone would pass it off as that
    region's. *live*: the command has ``--live`` to ask the AWS Pricing API instead."""
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not region or region == "us-east-1" or not any(s.startswith(_BUNDLED) for s in sources):
        return
    ask = f"--live asks the AWS Pricing API for {region}'s, --price gives your own" if live else \
        "--price gives your own"
    get_ui().warn(f"the price is the bundled us-east-1 one, not {region}'s: {ask}")
