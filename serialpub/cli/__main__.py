"""``python -m serialpub.cli``: the ``serialpub`` command."""

from serialpub.cli import main

main()
