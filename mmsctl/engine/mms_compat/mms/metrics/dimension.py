"""``mms.metrics.dimension``: a metric's name/value dimension."""

from __future__ import annotations

from typing import Any

__all__ = ["Dimension"]


class Dimension:
    """One dimension of a metric, such as ``Dimension("Level", "Model")``."""

    def __init__(self, name: str, value: Any) -> None:
        self.name = name
        self.value = value

    def __str__(self) -> str:
        return f"{self.name}:{self.value}"

    def to_dict(self) -> dict[str, Any]:
        return {"Name": self.name, "Value": self.value}
