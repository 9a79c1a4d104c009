"""The audit package keeps its privates private (docs/design.md section 9): what one of its
modules uses from another has a public name, and no module anywhere imports an underscore
name of ``serialpub.analysis.audit``. import-linter contracts work on whole modules, not on
the names imported from them, so this walks the import statements instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AUDIT = "serialpub.analysis.audit"
SCANNED = ("anonymizer", "checks", "serialpub", "state", "dags", "benchmarks", "tests")


def private_audit_imports(source: str, module: str) -> list[str]:
    """``line: name`` of every underscore name ``module`` imports from the audit package
    (absolute or relative ``from ... import``, or an attribute of an imported audit module)."""
    found = []
    tree = ast.parse(source)
    package = module.rsplit(".", 1)[0]
    audit_aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{target}" if target else base
            if target == AUDIT or target.startswith(AUDIT + "."):
                for alias in node.names:
                    if alias.name.startswith("_"):
                        found.append(f"{node.lineno}: {alias.name}")
                    else:
                        audit_aliases.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(AUDIT) and alias.asname:
                    audit_aliases.add(alias.asname)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
            and isinstance(node.value, ast.Name)
            and node.value.id in audit_aliases
        ):
            found.append(f"{node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_imports_an_underscore_name_of_the_audit() -> None:
    offenders = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT)
            module = ".".join(rel.with_suffix("").parts)
            for hit in private_audit_imports(path.read_text(encoding="utf-8"), module):
                offenders.append(f"{rel}:{hit}")
    assert offenders == []


def test_the_scan_sees_every_form_of_import() -> None:
    module = "serialpub.analysis.audit.series"
    assert private_audit_imports("from serialpub.analysis.audit.geometry import _Tree\n", "x.y") == ["1: _Tree"]
    assert private_audit_imports("from .geometry import _join, Tree\n", module) == ["1: _join"]
    assert private_audit_imports("from . import geometry\ngeometry._codes(1)\n", module) == ["2: geometry._codes"]
    assert private_audit_imports("from serialpub.analysis.audit.geometry import Tree\n", "x.y") == []
    assert private_audit_imports("from anonymizer.topdown import _Tree\n", "x.y") == []
