"""Folders a generator makes (the demo's workspace, a generated dataset): replaced when an
earlier run made them, refused when they hold anything else."""

from __future__ import annotations

import shutil
from pathlib import Path

from serialpub.errors import InputError


def replace_generated_folder(out: Path, marker: str, marker_text: str, refusal: str) -> None:
    """Make ``out`` an empty folder holding the file ``marker``: a folder that holds it
    (made by an earlier run) is replaced, any other non-empty folder is refused, so a
    generator never deletes a user's files.

    Raises:
        InputError: ``out`` is a non-empty folder without the marker ("... is not <refusal>").
    """
    if out.exists() and any(out.iterdir()):
        if not (out / marker).exists():
            raise InputError(f"{out}: folder exists and is not {refusal}")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / marker).write_text(marker_text + "\n")
