"""The ``serialpub`` command line (docs/commands.md).

Bad input raises :class:`serialpub.errors.InputError`; :func:`main` prints it as one
line on standard error and exits with code 2, without a traceback. The commands live in
:mod:`.series`, :mod:`.releases`, :mod:`.checking` and :mod:`.data_user`; importing them registers them on
:data:`app`, in the order ``--help`` lists them.
"""

from serialpub.cli.app import app, main

# isort: split
from serialpub.cli import series  # noqa: F401 (registers: strategy, simulate, demo, history)

# isort: split
from serialpub.cli import releases  # noqa: F401 (registers: release, approve, report, reject, import-release)

# isort: split
from serialpub.cli import checking  # noqa: F401 (registers: audit, db, state)

# isort: split
from serialpub.cli import data_user  # noqa: F401 (registers: query, expand)

# isort: split
from serialpub.cli import planning  # noqa: F401 (registers: plan)

__all__ = ["app", "main"]
