"""What a Lambda image is: the build context's manifest (``mmsctl-lambda.json``).

``mmsctl lambda build`` writes it (:mod:`mmsctl.cloud.lambda_.build`) and ``lambda run-local
--build`` reads it (:mod:`mmsctl.lambda_.run_local`): a contract between the control plane
and the handler's side, like :mod:`~mmsctl.cloud.lambda_.env`, so run-local needs nothing of build.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from mmsctl.errors import UsageError

__all__ = ["MANIFEST", "BuildContext", "StaleBuildContext"]

MANIFEST = "mmsctl-lambda.json"


class StaleBuildContext(UsageError):
    """A build context whose manifest another mmsctl version wrote: it has to be written again."""

    reference = "lambda-stale-build-context"

    def __init__(self, message: str, *, path: Path, hint: Optional[str] = None) -> None:
        super().__init__(message, hint=hint)
        #: The build context's folder.
        self.path = path


@dataclass
class BuildContext:
    """A written build context and what the image made from it will do."""

    path: Path
    handler: str
    base_image: str
    model: str  # what the user named
    model_location: str  # in the image: /opt/mmsctl/model, or s3://bucket/key
    model_version: Optional[str]
    baked: bool
    env: dict[str, str] = field(default_factory=dict)
    requirements: list[str] = field(default_factory=list)
    mmsctl_version: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["path"] = str(self.path)
        return data

    @classmethod
    def read(cls, path: Path) -> "BuildContext":
        """The context in *path*, from its manifest.

        Raises:
            UsageError: *path* holds no build context made by ``mmsctl lambda build``.
        """
        manifest = Path(path) / MANIFEST
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"{path} is not a build context of `mmsctl lambda build` (no readable {MANIFEST})") from exc
        data["path"] = Path(path)
        try:
            return cls(**data)
        except TypeError as exc:
            raise StaleBuildContext(f"{manifest}: not written by this mmsctl ({exc})", path=Path(path),
                                    hint="write the context again, replacing this one") from exc
