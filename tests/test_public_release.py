"""What a published release tells that its counts do not (docs/threat-model.md, "Figures
computed from the raw snapshot"): nothing. Two worlds that publish the same groups publish
the same manifest; the figures computed from the raw snapshot stay in the evidence, which
the manifest binds by checksums that a secret nonce makes hiding."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import QIS, SENSITIVE, cli, make_workspace, snapshot
from hierarchy_oracle import ancestor_matrix

from serialpub.config import DATABASE_ENV, load_config
from serialpub.io.manifest import RAW_DERIVED_KEYS
from serialpub.workflow.publisher import Publisher

RELEASE = Path("releases") / "clinic" / "release-0001"


def _publish(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    publisher = Publisher(load_config(root))
    publisher.publish(snapshot(root, 1))
    publisher.store.engine.dispose()


def _group_of_records(root: Path) -> tuple[pd.DataFrame, list[int]]:
    """Release 1's snapshot and, per record, the published group (a row of the distinct QI
    label tuples) whose region holds its QI leaves."""
    publisher = Publisher(load_config(root))
    table = pd.read_parquet(root / RELEASE / "data.parquet")
    hierarchies = publisher.read_hierarchies(table)
    groups = table[QIS].drop_duplicates().reset_index(drop=True)
    raw = pd.read_csv(snapshot(root, 1), dtype=str)
    inside = np.ones((len(raw), len(groups)), dtype=bool)
    for q in QIS:
        h = hierarchies[q]
        covers = ancestor_matrix(h)  # (leaf, node)
        inside &= covers[np.ix_(h.leaf_codes(raw[q]), [h.node(label) for label in groups[q]])]
    assert (inside.sum(axis=1) == 1).all()  # the regions tile the domain
    publisher.store.engine.dispose()
    return raw, inside.argmax(axis=1).tolist()


def _public(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest without what differs between any two runs: the time, and the checksums
    of the evidence (random nonces) and of the sign-off that names them."""
    out = {k: v for k, v in manifest.items() if k not in {"created", "report", "sign_off", "signing_key"}}
    out["validation"] = {k: v for k, v in manifest["validation"].items() if k not in {"sha256", "page_sha256"}}
    return out


@pytest.mark.slow
def test_two_worlds_with_the_same_groups_publish_the_same_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """World B swaps the diseases of two records of one group that sit on different QI
    leaves. The groups, their counts and the breach probabilities are those of world A, so
    the charge is the same; the query errors and measures, computed on the raw snapshot,
    differ, and must not reach the public manifest."""
    a = make_workspace(tmp_path / "a")
    _publish(a, monkeypatch)
    raw, group = _group_of_records(a)
    keys = raw[QIS].agg("|".join, axis=1)
    pair = next(
        (i, j)
        for i in range(len(raw))
        for j in range(i + 1, len(raw))
        if group[i] == group[j] and keys[i] != keys[j] and raw[SENSITIVE][i] != raw[SENSITIVE][j]
    )
    b = tmp_path / "b"
    shutil.copytree(a, b, ignore=shutil.ignore_patterns("releases", "state.sqlite*"))
    swapped = raw.copy()
    swapped.loc[list(pair), SENSITIVE] = raw.loc[list(pair[::-1]), SENSITIVE].to_numpy()
    swapped.to_csv(snapshot(b, 1), index=False)
    _publish(b, monkeypatch)

    assert (a / RELEASE / "data.parquet").read_bytes() == (b / RELEASE / "data.parquet").read_bytes()
    ma, mb = (json.loads((w / RELEASE / "manifest.json").read_text(encoding="utf-8")) for w in (a, b))
    assert not set(RAW_DERIVED_KEYS) & set(ma)
    assert all("sha256" not in v for v in ma["validation"]["suites"].values())
    assert _public(ma) == _public(mb)
    # the worlds do differ where the raw snapshot is read: the evidence the publisher keeps
    ra, rb = (json.loads((w / RELEASE / "report.json").read_text(encoding="utf-8")) for w in (a, b))
    errors = [{m["name"]: m["value"] for m in r["utility"]} for r in (ra, rb)]
    name = "average relative error of range-count queries"
    assert errors[0][name] != errors[1][name]


@pytest.mark.slow
def test_the_evidence_checksums_are_hiding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same world published twice: equal data and equal public manifests, but evidence
    whose checksums differ (a secret nonce in each file), so that hashing the evidence of a
    guessed world confirms nothing."""
    a = make_workspace(tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    _publish(a, monkeypatch)
    _publish(b, monkeypatch)
    ma, mb = (json.loads((w / RELEASE / "manifest.json").read_text(encoding="utf-8")) for w in (a, b))
    assert _public(ma) == _public(mb)
    assert ma["validation"]["sha256"] != mb["validation"]["sha256"]
    # validation.html carries the same nonce, in a comment, so its checksum hides the page too
    assert ma["validation"]["page_sha256"] != mb["validation"]["page_sha256"]
    assert ma["report"]["report.html"] != mb["report"]["report.html"]
    assert ma["report"]["report.json"] != mb["report"]["report.json"]
    assert ma["sign_off"]["report_sha256"] == ma["report"]["report.html"]
    for name in ("report.json", "validation.json"):
        nonces = [json.loads((w / RELEASE / name).read_text(encoding="utf-8"))["nonce"] for w in (a, b)]
        assert len(set(nonces)) == 2 and all(len(n) == 64 for n in nonces)


def test_a_public_copy_without_the_evidence_audits_and_a_partial_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the public receives (data.parquet, manifest.json, manifest.sig) audits PASS with
    a note; evidence present but for one file is a finding (deleted after publication)."""
    from serialpub.analysis.audit import audit_workspace

    root = make_workspace(tmp_path / "ws")
    _publish(root, monkeypatch)
    folder = root / RELEASE
    evidence = ["report.html", "report.json", "validation.json", "validation.html"]
    kept = tmp_path / "kept"
    kept.mkdir()
    for name in evidence:
        (folder / name).rename(kept / name)
    result = audit_workspace(root)
    assert result.ok, result.findings
    assert any("release 1: the evidence" in n and "not in this copy" in n for n in result.notes)
    for name in evidence[1:]:
        (kept / name).rename(folder / name)
    result = audit_workspace(root)
    assert not result.ok
    assert any(f.startswith("release 1: report.html is missing") for f in result.findings)


def test_the_public_copy_holds_the_releases_and_no_evidence(published_workspaces: Any, tmp_path: Path) -> None:
    """`serialpub public-copy`: per release data.parquet, manifest.json and manifest.sig,
    with the hierarchies, the public key and (asked for) the register; it audits PASS with
    the key; a second run adds nothing; a copied file edited later is never overwritten; a
    tampered workspace file is refused before anything is written."""
    ws = published_workspaces.copy(tmp_path / "ws", releases=2)
    out = tmp_path / "public"
    done = cli("public-copy", "--config", ws, "--out", out, "--with-register")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "releases 1-2" in done.stdout + done.stderr
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    releases = [f for f in files if f.startswith("releases/")]
    assert releases == [
        "releases/clinic/checkpoint.json",
        "releases/clinic/checkpoint.sig",
        *(
            f"releases/clinic/release-000{n}/{name}"
            for n in (1, 2)
            for name in ("data.parquet", "manifest.json", "manifest.sig")
        ),
    ]
    assert "keys/publisher.pub" in files and "register.csv" in files and "keys/publisher.key" not in files
    assert {f for f in files if f.startswith("hierarchies/")} == {f"hierarchies/{q}.csv" for q in [*QIS, SENSITIVE]}
    from serialpub.analysis.audit import audit_workspace

    result = audit_workspace(out, public_key=out / "keys" / "publisher.pub")
    assert result.ok, result.findings
    # one note naming both releases, not one per release
    [note] = [n for n in result.notes if "not in this copy" in n]
    assert note.startswith("releases 1-2: the evidence")
    again = cli("public-copy", "--config", ws, "--out", out, "--with-register")
    # the console wraps at 120 columns, and the temporary folder's path may be long
    assert again.returncode == 0 and "0 file(s) written" in " ".join(again.stdout.split())
    (out / "releases" / "clinic" / "release-0001" / "manifest.json").write_text("{}", encoding="utf-8")
    refused = cli("public-copy", "--config", ws, "--out", out)
    assert refused.returncode == 2 and "release-0001/manifest.json: differs from" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    (ws / "releases" / "clinic" / "release-0002" / "data.parquet").write_bytes(b"not parquet")
    fresh = tmp_path / "fresh"
    tampered = cli("public-copy", "--config", ws, "--out", fresh)
    assert tampered.returncode != 0 and "release-0002/data.parquet" in tampered.stderr
    assert not fresh.exists()
    inside = cli("public-copy", "--config", ws, "--out", ws / "public")
    assert inside.returncode == 2 and "outside the workspace" in inside.stderr


def test_a_public_copy_of_a_hierarchy_serialpub_cannot_read_is_refused(published_once: Path, tmp_path: Path) -> None:
    """The hierarchies go to the public as they are: one serialpub would refuse to read is
    refused here too, before anything is written."""
    path = published_once / "hierarchies" / "zipcode.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2].split(";")[0] + ";;*"  # an empty level in the middle of a path
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "public"
    done = cli("public-copy", "--config", published_once, "--out", out)
    assert done.returncode == 2 and "zipcode.csv" in done.stderr, done.stdout + done.stderr
    assert not out.exists()


@pytest.mark.slow
def test_a_public_copy_of_a_presence_series_is_not_verifiable_rather_than_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Presence known, each individual present in every other period: the public copy does
    not say who was present, so its audit links everyone of a region in every release, and
    that upper bound exceeds 1/ℓ where the exact figure does not. The audit used to call the
    sound series FAIL (exit 1); it now says NOT VERIFIABLE from this copy (exit 5), with the
    manifests' own figure, and the data holder's audit with the snapshots passes it."""
    import random

    from helpers import DISEASES

    root = make_workspace(tmp_path / "ws", n=200, periods=6, dilution="presence", l=3, k_prime=3)
    rng = random.Random(1)
    people = (root / "register.csv").read_text(encoding="utf-8").splitlines()[1:]
    for t in range(1, 7):
        present = [p for i, p in enumerate(people) if i % 2 == t % 2]
        rows = [f"{p},{rng.choices(DISEASES, weights=[5, 5, 5, 5, 1, 1])[0]}" for p in present]
        snapshot(root, t).write_text("\n".join(["id,sex,zipcode,age,disease", *rows]) + "\n", encoding="utf-8")
    monkeypatch.delenv(DATABASE_ENV, raising=False)
    publisher = Publisher(load_config(root))
    for t in range(1, 7):
        publisher.publish(snapshot(root, t))
    publisher.store.engine.dispose()
    stated = json.loads((root / "releases/clinic/release-0006/manifest.json").read_text())["max_breach_probability"]
    assert stated <= 1 / 3

    out = tmp_path / "public"
    assert cli("public-copy", "--config", root, "--out", out, "--with-register").returncode == 0
    public = cli("audit", out, "--public-key", out / "keys" / "publisher.pub")
    text = " ".join(public.stdout.split())
    assert public.returncode == 5, text + public.stderr
    assert text.endswith("verdict: NOT VERIFIABLE from this copy (release(s) 1-6)")
    assert f"the manifests state max p = {stated:.6g} (release 6)" in text
    assert "0 (individual, value) pair(s) above 1/ℓ on the links the published files prove" in text
    exact = cli("audit", root, "--snapshots", root / "snapshots")
    assert exact.returncode == 0 and " ".join(exact.stdout.split()).endswith("verdict: PASS"), exact.stdout
