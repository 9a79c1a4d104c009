"""The ``serialpub`` command in a real process that does not import the pipeline again.

A fresh ``python -m serialpub.cli`` spends most of its CPU importing pandas, pyarrow, Great
Expectations and SQLAlchemy before it reads a byte (docs/testing.md, "Where the time goes").
The crash catalogue needs real processes (each is killed with SIGKILL at a failpoint) but
not fresh interpreters: :func:`run` forks each one from multiprocessing's fork server, which
imported the command once (``set_forkserver_preload``). The child is its own process with
its own pid, takes the command's environment, folder and arguments as ``python -m
serialpub.cli`` would, runs the same entry point (:func:`serialpub.cli.main`) and exits
with its exit code, or dies of the signal that killed it.

This module imports nothing of pytest, so the fork server loads it quickly.
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.forkserver
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: what the fork server imports once: the command and the publication it runs
PRELOAD = ["forked_cli", "serialpub.cli", "serialpub.workflow.publisher"]

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(PRELOAD)


def stop_server() -> None:
    """Stop the fork server and wait for it, so that the CPU time of the commands it
    reaped counts in this process's children (``/usr/bin/time``, ``resource``) instead of
    vanishing with an orphan. Its only stopping method is private (CPython's own tests use it)."""
    multiprocessing.forkserver._forkserver._stop()


atexit.register(stop_server)


@dataclass(frozen=True)
class Finished:
    """A finished command: its pid, its exit code (``-N`` if signal N killed it, as
    :attr:`subprocess.Popen.returncode`), and what it wrote to standard output and error."""

    pid: int
    returncode: int
    stdout: str
    stderr: str


def _child(args: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    """In the forked process: the environment, folder, standard streams and arguments of
    ``python -m serialpub.cli ARGS``, then the command's entry point."""
    os.environ.clear()
    os.environ.update(env)
    # set on import by the validation layer (checks/), which the fork server imported
    # before this environment replaced its own
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    os.chdir(cwd)
    for path, fd in ((out, 1), (err, 2)):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(target, fd)
        os.close(target)
    sys.argv = ["serialpub", *args]
    from serialpub.cli import main

    main()


def run(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> Finished:
    """Run ``serialpub ARGS`` in a process forked from the preloaded fork server and wait
    for it (``timeout`` seconds, then it is killed and :class:`TimeoutError` raised)."""
    with tempfile.TemporaryDirectory(prefix="forked-cli-") as folder:
        out, err = str(Path(folder) / "stdout"), str(Path(folder) / "stderr")
        proc = _CONTEXT.Process(target=_child, args=(list(args), dict(env), str(cwd), out, err))
        proc.start()
        proc.join(timeout)
        if proc.exitcode is None:
            proc.kill()
            proc.join()
            raise TimeoutError(f"serialpub {' '.join(args)}: still running after {timeout} s")
        assert proc.pid is not None
        written = [Path(f).read_text(errors="replace") if Path(f).exists() else "" for f in (out, err)]
        return Finished(proc.pid, proc.exitcode, *written)
