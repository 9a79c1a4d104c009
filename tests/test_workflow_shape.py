"""The shape the writer's draft path keeps (docs/design.md section 6): no function of
serialpub/workflow/ longer than a screen, and no module-level mutable object in the
layers that call themselves pure (anonymizer/, checks/) nor in the draft path itself."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 80


def _functions(path: Path) -> list[tuple[str, int]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        (node.name, (node.end_lineno or node.lineno) - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    ]


def test_no_function_of_the_workflow_is_over_80_lines() -> None:
    long = [
        f"{path.relative_to(ROOT)}:{name} ({lines} lines)"
        for path in sorted((ROOT / "serialpub" / "workflow").glob("*.py"))
        for name, lines in _functions(path)
        if lines > MAX_LINES
    ]
    assert long == []


def test_the_length_rule_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    path = tmp_path / "long.py"
    path.write_text(f"def long() -> None:\n{body}\n", encoding="utf-8")
    assert _functions(path) == [("long", MAX_LINES + 1)]


#: what makes a module-level object mutable state: a container display or a call making one,
#: a lock, or a module that rebinds its own names (``global``)
_MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque", "Lock", "RLock",
                  "WeakValueDictionary", "WeakKeyDictionary", "bytearray"}  # fmt: skip


def _mutable_globals(source: str) -> list[str]:
    tree = ast.parse(source)
    found = [f"global {', '.join(n.names)} (line {n.lineno})" for n in ast.walk(tree) if isinstance(n, ast.Global)]
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue  # the export list, read by tools
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            value = node.value
            called = value.func if isinstance(value, ast.Call) else None
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", None)
            if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp) or (
                name in _MUTABLE_CALLS
            ):
                found.append(f"{ast.unparse(node).splitlines()[0][:60]} (line {node.lineno})")
    return found


def test_no_module_level_mutable_state_in_the_pure_layers() -> None:
    """A cache belongs to an object its caller owns: under the usual Airflow executors each
    task is its own process, and a process-wide memo makes the tests take another path. The
    draft path keeps to the same rule (what a caller sets for a run goes in a context
    variable, as the progress listeners do)."""
    found = [
        f"{path.relative_to(ROOT)}: {what}"
        for package in ("anonymizer", "checks", "serialpub/workflow")
        for path in sorted((ROOT / package).rglob("*.py"))
        for what in _mutable_globals(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_state_rule_sees_a_memo_a_lock_and_a_global() -> None:
    source = "import threading\n_MEMO: dict[int, int] = {}\n_LOCK = threading.Lock()\ndef f():\n    global _X\n"
    assert len(_mutable_globals(source)) == 3
    assert _mutable_globals("NAMES = ('a', 'b')\nLIMIT = 3\n") == []


#: the values a step may take (docs/design.md section 6); the Publisher holds them and is
#: the entry point, never a step's parameter
_WHOLE = {"Publisher", "PlanInputs"}


def _whole_context_parameters(source: str) -> list[str]:
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            found += [f"{node.name}({a.arg}: {ast.unparse(a.annotation)})" for a in args
                      if a.annotation is not None and ast.unparse(a.annotation).strip("'\"") in _WHOLE]  # fmt: skip
    return found


def test_no_step_takes_the_whole_publisher() -> None:
    """Each step takes the series, the dataset's inputs, the register reader and the
    request it reads, so a reader sees from its signature what it touches."""
    found = [
        f"{path.relative_to(ROOT)}: {what}"
        for path in sorted((ROOT / "serialpub" / "workflow").glob("*.py"))
        for what in _whole_context_parameters(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_step_rule_sees_a_publisher_parameter() -> None:
    assert _whole_context_parameters("def f(p: Publisher, n: int) -> None: ...\n") == ["f(p: Publisher)"]
    assert _whole_context_parameters("def f(p: 'Publisher') -> None: ...\n") == ["f(p: 'Publisher')"]
    assert _whole_context_parameters("def f(series: DatasetSeries) -> None: ...\n") == []
