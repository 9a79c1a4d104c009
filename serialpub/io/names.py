"""Names that become file names: the one check every name read from a file passes before
it is joined into a path (docs/release-contract.md, "Names and checksums").

A manifest names the quasi-identifiers and the sensitive column (``hierarchies/<qi>.csv``,
``hierarchy-versions/<qi>/<sha256>.csv``), the register and hierarchy versions by their
sha256 (``registers/<sha256>.parquet``) and its evidence files; a register version names
its parent version. A public copy is untrusted input (docs/data-users.md): a name such
as ``../../etc/passwd`` would make a reader open a file outside the copy. So a name is one
path component, neither ``.`` nor ``..``, with no separator (``/``, ``\\``), no drive
(``C:``), no control character (NUL included) and no longer than a file name may be; a
sha256 is 64 hex digits. Anything else is refused with one line naming the file and the
field.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath, PureWindowsPath
from typing import Annotated

from pydantic import AfterValidator

from serialpub.errors import InputError, quoted

__all__ = ["NAME_BYTES", "SHA256_PATTERN", "SafeName", "Sha256", "check_name", "check_sha256", "name_problem"]

#: a sha256 as the release contract writes it (lower case) or a user may (upper case)
SHA256_PATTERN = r"^[0-9a-fA-F]{64}$"
_SHA256 = re.compile(SHA256_PATTERN)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: the longest file name the common file systems take (ext4, APFS, NTFS: 255)
NAME_BYTES = 255


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one component of a path, or None when it can.

    Refused: the empty name, one longer than :data:`NAME_BYTES` in UTF-8, ``.`` and ``..``,
    a path separator (``/`` or ``\\``), a drive or root (``C:``, ``//server``) and any
    control character (NUL included)."""
    if not name:
        return "is empty"
    if len(name.encode("utf-8", "surrogatepass")) > NAME_BYTES:
        return f"is longer than a file name may be ({NAME_BYTES} bytes)"
    if name in (".", ".."):
        return "is a relative folder ('.' or '..'), not a name"
    if _CONTROL.search(name):
        return "holds a control character"
    if "/" in name or "\\" in name:
        return "holds a path separator ('/' or '\\')"
    windows = PureWindowsPath(name)
    if windows.drive or windows.root or PurePosixPath(name).is_absolute():
        return "names a drive or an absolute path"
    return None


def _safe(name: str) -> str:
    problem = name_problem(name)
    if problem is not None:
        # pydantic words it "Value error, ..." and adds the value it refused
        raise ValueError(f"{problem}; a name here becomes a file name, so it must be one plain name")
    return name


def _sha(value: str) -> str:
    if not _SHA256.fullmatch(value):
        raise ValueError("is not a sha256 (64 hex digits)")
    return value


#: a pydantic string type for a name read from a file that becomes a file name
SafeName = Annotated[str, AfterValidator(_safe)]
#: a pydantic string type for a sha256 that names a file (a register or hierarchy version)
Sha256 = Annotated[str, AfterValidator(_sha)]


def check_name(name: object, where: str, field: str) -> str:
    """``name`` when it is a plain name (:func:`name_problem`).

    Args:
        name: the value read.
        where: the file it was read from.
        field: the field or key that holds it.

    Raises:
        InputError: ``where``: ``field`` and why (the value quoted, shortened).
    """
    problem = "is not a string" if not isinstance(name, str) else name_problem(name)
    if problem is not None:
        raise InputError(
            f"{where}: {field} {quoted(name)} {problem}; it would become a file name, so this file cannot be used"
        )
    assert isinstance(name, str)
    return name


def check_sha256(value: object, where: str, field: str) -> str:
    """``value`` in lower case when it is a sha256 (64 hex digits).

    Raises:
        InputError: ``where``: ``field`` is something else (quoted, shortened).
    """
    if not isinstance(value, str) or not _SHA256.fullmatch(value):
        raise InputError(
            f"{where}: {field} {quoted(value)} is not a sha256 (64 hex digits); it names a file, so this "
            "file cannot be used"
        )
    return value.lower()
