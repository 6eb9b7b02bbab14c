"""``Made``: one line of what a command created, that also names the resource, so it can be deleted again."""

from __future__ import annotations

__all__ = ["Made"]


class Made(str):
    """One line of a command's "created" list (``security group sg-… (mmsctl-server)``) that also names the
    resource: *kind* (``security-group``, ``vpc-endpoint``, ``iam-role``, ``instance-profile``) and *id*."""

    kind: str
    id: str

    def __new__(cls, text: str, *, kind: str, id: str) -> "Made":
        made = super().__new__(cls, text)
        made.kind, made.id = kind, id
        return made
