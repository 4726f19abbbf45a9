"""Publishing a directory built beside its destination (model directories, local Zarr stores).

A file can replace another atomically (:func:`os.replace`); a non-empty directory cannot. The new directory is
therefore built as a sibling and swapped in with two renames: the old one is moved aside, the new one moved in,
and the old one removed only once the new one is in place. A failure at any step leaves the destination as it was
(the old directory is moved back) and never a half-written directory under the destination's name.
"""

from __future__ import annotations

import os
import shutil
import uuid

__all__ = ["replace_directory"]


def replace_directory(tmp: str, dest: str) -> None:
    """Move the finished directory ``tmp`` to ``dest`` (same parent), replacing ``dest`` if it exists.

    ``tmp`` is removed if the move fails; the caller has checked that ``dest``, if it exists, may be replaced.
    """
    try:
        if os.path.lexists(dest):
            parent, base = os.path.split(dest)
            trash = os.path.join(parent, f".{base}.old-{uuid.uuid4().hex[:12]}")
            os.rename(dest, trash)
            try:
                os.rename(tmp, dest)
            except BaseException:
                os.rename(trash, dest)
                raise
            shutil.rmtree(trash, ignore_errors=True)
        else:
            os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
