"""Compare the releases of two workspaces: are they the same apart from timestamps?

Used to show that a restructuring changes structure, not results: publish the
same demo from the commit before and after, then

    .venv/bin/python benchmarks/compare_releases.py BEFORE_WORKSPACE AFTER_WORKSPACE

``data.parquet`` must be byte-identical. ``manifest.json``, ``validation.json`` and
``report.json`` are compared as JSON, ``report.html`` and ``validation.html`` as text, with
every ISO-8601 timestamp and the workspace's own path masked, and without the checksums of
files that hold timestamps (the validation evidence, the report page and what records their
checksums). Keys only the second manifest has are listed as new
fields, not as differences. Exit status 0 when nothing differs, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

#: timestamps as serialpub and Great Expectations write them
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)?")
#: checksums shown on the pages (of suite results, which name the workspace's files)
SHA256 = re.compile(r"\b[0-9a-f]{64}\b")
#: manifest entries that are checksums of files holding timestamps
TIMESTAMPED_SUMS = (("validation", "sha256"), ("sign_off", "report_sha256"), ("report",))
#: keys of validation.json/report.json results that are run identifiers or checksums of timestamped content
#: (and the evidence's secret random nonce, new in every run)
VOLATILE_KEYS = {"run_id", "run_time", "validation_time", "batch_id", "id", "sha256", "report_sha256", "nonce"}


def _mask(value: Any, root: Path) -> Any:
    """``value`` with timestamps, volatile keys and the workspace's own path masked."""
    if isinstance(value, dict):
        return {k: ("<volatile>" if k in VOLATILE_KEYS else _mask(v, root)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, root) for v in value]
    if isinstance(value, str):
        return TIMESTAMP.sub("<time>", value.replace(str(root.resolve()), "<workspace>"))
    return value


def _manifest(path: Path, root: Path) -> dict[str, Any]:
    m: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    for keys in TIMESTAMPED_SUMS:
        node = m
        for k in keys[:-1]:
            node = node.get(k) or {}
        if isinstance(node, dict) and keys[-1] in node:
            node[keys[-1]] = "<timestamped file>"
    suites = (m.get("validation") or {}).get("suites") or {}
    for verdict in suites.values():
        if "sha256" in verdict:  # draft manifests only since the published ones leave it out
            verdict["sha256"] = "<timestamped file>"
    return _mask(m, root)  # type: ignore[no-any-return]


def _diff(a: Any, b: Any, where: str, out: list[str], new: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in a:
            if k not in b:
                out.append(f"{where}.{k}: missing after")
            else:
                _diff(a[k], b[k], f"{where}.{k}", out, new)
        new.extend(f"{where}.{k}" for k in b if k not in a)
        if [k for k in a if k in b] != [k for k in b if k in a]:
            out.append(f"{where}: keys in another order")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _diff(x, y, f"{where}[{i}]", out, new)
    elif a != b:
        out.append(f"{where}: {str(a)[:80]!r} != {str(b)[:80]!r}")


def compare(before: Path, after: Path) -> tuple[int, list[str], list[str]]:
    """(releases compared, differences, new fields) between two workspaces' release stores."""
    diffs: list[str] = []
    new: list[str] = []
    a_dirs = sorted(before.glob("releases/*/release-*"))
    b_dirs = sorted(after.glob("releases/*/release-*"))
    names = [d.relative_to(before).as_posix() for d in a_dirs]
    if names != [d.relative_to(after).as_posix() for d in b_dirs]:
        diffs.append(f"release folders differ: {len(a_dirs)} before, {len(b_dirs)} after")
    for name in names:
        a, b = before / name, after / name
        if not b.is_dir():
            continue
        if (a / "data.parquet").read_bytes() != (b / "data.parquet").read_bytes():
            diffs.append(f"{name}/data.parquet: bytes differ")
        ma, mb = _manifest(a / "manifest.json", before), _manifest(b / "manifest.json", after)
        _diff(ma, mb, f"{name}/manifest", diffs, new)
        for file in ("validation.json", "report.json"):
            if (a / file).exists() or (b / file).exists():
                ja = _mask(json.loads((a / file).read_text(encoding="utf-8")), before)
                jb = _mask(json.loads((b / file).read_text(encoding="utf-8")), after)
                _diff(ja, jb, f"{name}/{file}", diffs, new)
        for file in ("report.html", "validation.html"):
            if (a / file).exists() or (b / file).exists():
                ha = SHA256.sub("<sha256>", _mask((a / file).read_text(encoding="utf-8"), before))
                hb = SHA256.sub("<sha256>", _mask((b / file).read_text(encoding="utf-8"), after))
                if ha != hb:
                    diffs.append(f"{name}/{file}: text differs apart from timestamps and the workspace path")
    return len(names), diffs, new


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    n, diffs, new = compare(args.before, args.after)
    print(f"{n} release(s) compared: {len(diffs)} difference(s); new fields: {sorted(set(new)) or 'none'}")
    for d in diffs[:50]:
        print("  " + d)
    return 1 if diffs or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
