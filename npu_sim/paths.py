"""Input paths checked before they are opened, so each failure names its real cause.

Opening a FIFO blocks and /dev/zero never ends, so only regular files are read; a symlink
loop or a dangling symlink is not reported as a missing file.
"""
from __future__ import annotations

import errno
import os
import stat

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def why_unreadable(path) -> str:
    """'' for a regular file, else the cause in a few words ("no such file", "a symlink loop")."""
    try:
        st = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop"
        if exc.errno == errno.ENOENT and os.path.islink(path):
            return f"a dangling symlink (to {os.readlink(path)})"
        return "no such file" if exc.errno == errno.ENOENT else exc.strerror or str(exc)
    if stat.S_ISDIR(st.st_mode):
        return "is a directory"
    for test, kind in _KINDS:
        if test(st.st_mode):
            return f"{kind}, not a regular file"
    return ""


def os_reason(exc: OSError) -> str:
    return "a symlink loop" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
