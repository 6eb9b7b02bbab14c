"""One line of a deploy's report (create, update, reuse, delete), shared by the products that deploy step by step."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Change"]


@dataclass
class Change:
    """One line of deploy's report."""

    action: str  # create | update | reuse | delete
    kind: str
    id: str

    def to_dict(self) -> dict[str, str]:
        return {"action": self.action, "kind": self.kind, "id": self.id}
