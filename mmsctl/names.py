"""Model names and MMS's ``name=location`` form, read the same way by predict, the server, the zoo and EC2.

``--models squeezenet=squeezenet_v1.1.mar`` (MMS's ``--models``, ``load_models``) names a
model and says where it is. Every command that takes a model splits it here, so
``r18=https://host/m.mar?x=1`` and a file that really is called ``a=b.mar`` mean the
same thing everywhere.
"""

from __future__ import annotations

import os
import re
from typing import Optional

__all__ = ["MODEL_NAME_PATTERN", "split_named"]

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
