"""Who may sign off a release (docs/compliance.md "Who may sign off").

The identity of a decision is one the system authenticated, never free text:

- on the command line, the operating-system account running ``serialpub approve`` or
  ``reject`` (:func:`os_login`: the effective user id's name, not an environment variable
  a user can set);
- at the Airflow gate, the Airflow user who answered (the gate is assigned to the
  approvers, and the decision is checked here again).

That identity must be on ``sign_off.approvers``. Under ``sign_off.four_eyes`` (the
default) the account that prepared the release (``prepared_by`` in its state row) cannot
approve it; the rule is the one recorded when the release was drafted
(:func:`serialpub.workflow.manifest_binding.preparation`), not today's configuration.
Names are compared after Unicode NFKC normalization with runs of white space
collapsed; a name holding an invisible or control character (a zero-width space, say) is
refused, so two names that look alike are one name or an error.
"""

from __future__ import annotations

import os
import pwd
import unicodedata

from serialpub.config import Workspace
from serialpub.errors import InputError, quoted

#: Unicode categories that print nothing or control the terminal: format (U+200B, U+200D,
#: U+2060, bidi marks), control, private use, surrogate, unassigned, line/paragraph separators
INVISIBLE = frozenset({"Cf", "Cc", "Co", "Cs", "Cn", "Zl", "Zp"})


def normalize_name(name: str, where: str) -> str:
    """``name`` in NFKC with white space collapsed.

    Raises:
        InputError: ``where``: the name is empty or holds an invisible or control character.
    """
    text = unicodedata.normalize("NFKC", name)
    hidden = sorted({c for c in text if unicodedata.category(c) in INVISIBLE})
    if hidden:
        codes = ", ".join(f"U+{ord(c):04X}" for c in hidden)
        raise InputError(
            f"{where}: the name {quoted(name)} holds invisible or control characters ({codes}); type it plainly"
        )
    text = " ".join(text.split())
    if not text:
        raise InputError(f"{where}: the name is empty; sign-offs are recorded with who decided")
    return text


def os_login() -> str:
    """The operating-system account running this process (its effective user id's name)."""
    uid = os.geteuid()
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:  # a uid without a passwd entry (some containers)
        return f"uid:{uid}"


def authorize(ws: Workspace, who: str, preparer: str | None = None, four_eyes: bool | None = None) -> str:
    """The normalized identity ``who`` after checking that it may sign off releases of the
    workspace's dataset: on ``sign_off.approvers`` and, when ``preparer`` (the account that
    prepared the release being approved) is given under the four-eyes rule, not that
    account. ``four_eyes``: the rule as recorded when the release was drafted (None: the
    configuration's ``sign_off.four_eyes``).

    Raises:
        InputError: ``who`` is not an approver, prepared the release, or is malformed.
    """
    cfg, config_file = ws.config, ws.root / "serialpub.yaml"
    name = normalize_name(who, "the approver")
    approvers = [normalize_name(a, f"{config_file}: sign_off.approvers") for a in cfg.sign_off.approvers]
    if name not in approvers:
        listed = ", ".join(approvers) if approvers else "none are listed"
        raise InputError(
            f"{quoted(name)} may not sign off releases of {cfg.dataset!r}: not in sign_off.approvers of {config_file} "
            f"({listed}); whoever administers the configuration adds approvers there"
        )
    four_eyes = cfg.sign_off.four_eyes if four_eyes is None else four_eyes
    if preparer is not None and four_eyes and normalize_name(preparer, "prepared_by") == name:
        raise InputError(
            f"{quoted(name)} prepared this release and cannot also approve it (four-eyes rule, sign_off.four_eyes "
            "as it was when the release was drafted); "
            "another approver signs off"
        )
    return name
