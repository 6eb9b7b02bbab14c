"""One line of a deploy's report (create, update, reuse, delete), and the error of a deploy that stopped part way,
shared by the products that deploy step by step."""

from __future__ import annotations

from dataclasses import dataclass

from mmsctl.errors import CloudError, MmsError

__all__ = ["Change", "StoppedPartWay"]


@dataclass
class Change:
    """One line of deploy's report."""

    action: str  # create | update | reuse | delete
    kind: str
    id: str

    def to_dict(self) -> dict[str, str]:
        return {"action": self.action, "kind": self.kind, "id": self.id}


class StoppedPartWay(CloudError):
    """A step failed after earlier steps made something: what this run made is named, nothing is hidden. The
    failed step's exit code is the error's; its hint (``cause_hint``) goes before the command's own."""

    def __init__(self, name: str, cause: MmsError, made: list[Change]) -> None:
        what = ", ".join(f"{c.kind} {c.id}" for c in made)
        super().__init__(f"{cause.message}; deploy of {name} stopped there, after it made: {what} "
                         f"(destroying {name} removes them)")
        self.exit_code = cause.exit_code
        self.cause_hint = cause.hint
        self.name = name
        self.made = made
