"""``python tests/reader_only.py ARGS``: ``serialpub ARGS`` as a data user's install runs it,
where neither the publisher's packages (``serialpub[publisher]``,
:data:`serialpub.cli.app.PUBLISHER_MODULES`) nor Airflow can be imported: importing one
raises ModuleNotFoundError, as in an environment that lacks it."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from serialpub.cli.app import PUBLISHER_MODULES

#: ``READER_ONLY_BLOCK=a,b`` blocks those top-level modules too (what a query must not import)
BLOCKED = PUBLISHER_MODULES | {"airflow"} | set(filter(None, os.environ.get("READER_ONLY_BLOCK", "").split(",")))


class _Blocked(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {fullname!r} (a reader install)", name=fullname)
        return None


if __name__ == "__main__":
    loaded = sorted(name for name in sys.modules if name.partition(".")[0] in BLOCKED)
    if loaded:  # the command line's own module must not have loaded one already
        sys.exit(f"reader_only: already imported before blocking: {', '.join(loaded)}")
    sys.meta_path.insert(0, _Blocked())
    from serialpub.cli import main

    sys.argv = ["serialpub", *sys.argv[1:]]
    main()
