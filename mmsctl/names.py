"""Model names and locations, read the same way by predict, the server, the zoo, EC2 and fleets.

``--models squeezenet=squeezenet_v1.1.mar`` (MMS's ``--models``, ``load_models``) names a
model and says where it is. Every command that takes a model splits it here, so
``r18=https://host/m.mar?x=1`` and a file that really is called ``a=b.mar`` mean the
same thing everywhere.

Where a location points is one rule, :func:`model_location`, used by ``predict``,
``serve start --models``, ``ec2 launch --models`` and ``fleet create --models``:

* ``http(s)://…`` is a URL, ``file://…`` a local path;
* a path is anything with a ``/`` (``./squeezenet``, ``models/x``, ``/abs``), or starting
  with ``.`` or ``~``, or ending in an archive suffix (``resnet.mar``, ``m.tar.gz``);
* any other word is a zoo name (``squeezenet``) — even when a file or folder of that name
  is in the current folder (``archive extract squeezenet.mar`` makes one): the
  location then says so (``shadowed``), and ``./squeezenet`` picks the folder.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal, Optional

__all__ = ["ARCHIVE_SUFFIXES", "MODEL_NAME_PATTERN", "ModelLocation", "model_location", "split_named"]

#: File names that are model archives (a word ending in one is a path, not a zoo name).
ARCHIVE_SUFFIXES = (".mar", ".model", ".tar.gz", ".tgz", ".zip")

#: The model names model-archiver accepts (MMS uses them in URLs and file names).
MODEL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-.]*$")


def split_named(text: str) -> tuple[Optional[str], str]:
    """``name=location`` -> ``(name, location)``; anything else -> ``(None, text)``.

    The part before the first ``=`` must be a model name (so a URL, whose query may hold
    ``=``, is never split), the location must not be empty, and a path that exists as
    typed is taken as it is.

    Example:
        >>> split_named("r18=https://example.com/resnet-18.mar")
        ('r18', 'https://example.com/resnet-18.mar')
        >>> split_named("squeezenet")
        (None, 'squeezenet')
    """
    name, sep, location = text.partition("=")
    if not sep or not location or not MODEL_NAME_PATTERN.match(name) or os.path.exists(text):
        return None, text
    return name, location


@dataclass(frozen=True)
class ModelLocation:
    """Where a model argument points.

    Attributes:
        kind: ``zoo`` (a zoo name), ``path`` (a local file or folder) or ``url`` (http/https).
        value: the location as typed, without a ``name=`` prefix.
        name: the name given with ``name=location``, if any.
        shadowed: for a zoo name, the local file or folder of the same name that is *not*
            used (write ``./NAME`` for it); None when there is none.
    """

    kind: Literal["zoo", "path", "url"]
    value: str
    name: Optional[str] = None
    shadowed: Optional[str] = None

    @property
    def local_spelling(self) -> str:
        """How to name the shadowed file or folder instead: ``./squeezenet``."""
        return f"./{self.value}"


def _is_path(text: str) -> bool:
    lower = text.lower()
    return (
        "/" in text
        or "\\" in text
        or text.startswith((".", "~"))
        or lower.startswith("file://")
        or lower.endswith(ARCHIVE_SUFFIXES)
    )


def model_location(text: str) -> ModelLocation:
    """Read a model argument: a zoo name, a local path or a URL, optionally as ``name=location``.

    Example:
        >>> model_location("squeezenet").kind
        'zoo'
        >>> model_location("./squeezenet").kind, model_location("sq=resnet.mar").kind
        ('path', 'path')
    """
    name, value = split_named(text.strip())
    if value.lower().startswith(("http://", "https://")):
        return ModelLocation("url", value, name)
    if _is_path(value):
        return ModelLocation("path", value, name)
    return ModelLocation("zoo", value, name, value if os.path.exists(value) else None)
