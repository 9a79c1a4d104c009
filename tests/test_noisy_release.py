"""``partition_test: noisy`` through the pipeline: the settings it needs, the manifest that
records it, the secret seed beside the signing key that nothing published holds, and the
public audit of the releases it makes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from helpers import make_workspace, snapshot

from anonymizer.release import History, PrivacyParams, SnapshotCodes, anonymize_history
from anonymizer.settings import MAX_EPSILON
from serialpub.analysis.audit import audit_workspace, format_report
from serialpub.config import load_config
from serialpub.errors import InputError
from serialpub.workflow.anonymizing import NOISE_SEED
from serialpub.workflow.publisher import Publisher


@pytest.mark.slow
def test_noisy_releases_record_the_test_keep_the_seed_secret_and_pass_the_audit(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", n=120, partition_test="noisy", partition_epsilon=0.5)
    publisher = Publisher(load_config(root))
    for t in range(1, 4):
        publisher.publish(snapshot(root, t))
    seed = root / "keys" / NOISE_SEED
    secret = seed.read_bytes()
    assert len(secret) == 32 and seed.stat().st_mode & 0o077 == 0
    for t in range(1, 4):
        folder = root / "releases" / "clinic" / f"release-{t:04d}"
        manifest = json.loads((folder / "manifest.json").read_text())
        assert manifest["partition_test"] == "noisy" and manifest["partition_epsilon"] == 0.5
        for f in folder.iterdir():  # the secret is in no published file
            assert secret not in f.read_bytes() and secret.hex().encode() not in f.read_bytes()
    page = (root / "releases" / "clinic" / "release-0003" / "report.html").read_text()
    assert 'id="noisy-split-test"' in page and "ε = 0.5" in page and "e<sup>ε</sup>/ℓ = 0.824" in page
    report = audit_workspace(root)
    assert report.ok, format_report(report)
    assert "used the noisy split test (ε up to 0.5): a refused split may raise a posterior to e^ε = 1.649" in (
        format_report(report)
    )


def test_the_audit_finds_a_noisy_release_without_a_sound_epsilon() -> None:
    from serialpub.analysis.audit.manifest import ParsedManifest
    from serialpub.analysis.audit.result import AuditResult
    from serialpub.analysis.audit.series import noisy_notes

    def pm(release: int, test: str | None, eps: float | None) -> ParsedManifest:
        return ParsedManifest(
            release,
            "d",
            ["a"],
            "s",
            2.0,
            ["x"],
            "register",
            {},
            None,
            1,
            1,
            "global",
            "p",
            0,
            "mechanism",  # type: ignore[arg-type]
            [],
            None,
            [],
            0.3,
            test,
            eps,
        )

    result = AuditResult.__new__(AuditResult)
    result.findings, result.notes = [], []
    noisy_notes([pm(1, "noisy", 0.9), pm(2, "noisy", None), pm(3, None, 0.2), pm(4, "noisy", 0.5)], result)
    assert result.findings == [
        "release 1: partition_test noisy with partition_epsilon 0.9, not in (0, 0.6931] (ln 2)",
        "release 2: partition_test noisy with partition_epsilon None, not in (0, 0.6931] (ln 2)",
        "release 3: partition_epsilon without partition_test noisy",
    ]
    assert "release(s) 4 used the noisy split test (ε up to 0.5)" in result.notes[0]
    assert "at 0.4946 per release" in result.notes[0]


@pytest.mark.slow
def test_a_sound_series_records_no_partition_test(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    Publisher(load_config(root)).publish(snapshot(root, 1))
    manifest = json.loads((root / "releases" / "clinic" / "release-0001" / "manifest.json").read_text())
    assert "partition_test" not in manifest and "partition_epsilon" not in manifest
    assert 'id="noisy-split-test"' not in (root / "releases" / "clinic" / "release-0001" / "report.html").read_text()
    assert not (root / "keys" / NOISE_SEED).exists()


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ({"partition_test": "noisy"}, "needs partition_epsilon in (0, 0.6931]"),
        ({"partition_test": "noisy", "partition_epsilon": 0.7}, "needs partition_epsilon in (0, 0.6931]"),
        ({"partition_test": "noisy", "partition_epsilon": 0.0}, "needs partition_epsilon in (0, 0.6931]"),
        ({"partition_epsilon": 0.5}, "partition_epsilon is set but partition_test is 'sound'"),
        ({"partition_test": "noisy", "partition_epsilon": 0.5, "signing_key": None}, "needs a signing_key"),
        ({"partition_test": "noisy", "partition_epsilon": 0.5, "dilution": "presence"}, "needs dilution: register"),
        (
            {
                "partition_test": "noisy",
                "partition_epsilon": 0.5,
                "partition_model": "parts",
                "accept_known_breach": ["parts"],
            },
            "needs algorithm: topdown and partition_model: published",
        ),
    ],
)
def test_noisy_settings_that_cannot_hold_are_refused_in_one_line(
    tmp_path: Path, settings: dict[str, object], says: str
) -> None:
    root = make_workspace(tmp_path / "ws", **settings)
    with pytest.raises(InputError) as err:
        load_config(root)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_a_noisy_partition_meets_every_requirement_and_needs_its_noise() -> None:
    """Every group of a noisy release meets its requirement (the test takes a split only with
    a margin in every part), the same noise gives the same release, and the settings refuse
    to run without noise."""
    rng = np.random.default_rng(5)
    from test_topdown import HS

    keys = np.stack([rng.integers(0, h.n_leaves, 400) for h in HS], axis=1)
    present = np.sort(rng.choice(400, 200, replace=False))
    sets = rng.choice([-1, -1, -1, 0, 1], present.size)
    params = PrivacyParams(
        ell=2.0, strategy="constant", k_prime=3, partition_test="noisy", partition_epsilon=MAX_EPSILON
    )
    history = History.empty(np.full(400, 2.0), 2)
    snap = SnapshotCodes(present, sets, 2)
    results = [anonymize_history(keys, snap, history, params, HS, False, seed=1,
                                 noise=np.random.default_rng(9)) for _ in range(2)]  # fmt: skip
    a, b = results
    assert np.array_equal(a.group_nodes, b.group_nodes)
    ratio = a.group_candidates[:, None] / np.where(a.group_counts > 0, a.group_counts, 1)
    target = 1 / (1 - (1 - 1 / 2.0) ** (1 / 3))  # constant ratio at ℓ = 2, k' = 3
    assert (ratio[a.group_counts > 0] >= target - 1e-9).all()
    with pytest.raises(ValueError, match="needs the secret noise"):
        anonymize_history(keys, snap, history, params, HS, False, seed=1)
    assert math.isfinite(params.noisy_test().epsilon)  # type: ignore[union-attr]


def test_the_plan_tries_the_noisy_test_and_shows_its_epsilon_and_bound(tmp_path: Path) -> None:
    from helpers import cli

    root = make_workspace(tmp_path / "ws", n=120, periods=2)
    out = tmp_path / "plan.json"
    proc = cli(
        "plan",
        "--config",
        root,
        "--rounds",
        "2",
        "--protected",
        "rarest:2",
        "--partition-epsilon",
        "sound,0.69",
        "--jobs",
        "1",
        "--json",
        out,
    )
    assert proc.returncode == 0, proc.stderr
    by = {c["settings"].get("partition_epsilon"): c for c in json.loads(out.read_text())["candidates"]}
    assert set(by) == {None, 0.69}
    noisy = by[0.69]
    assert noisy["settings"]["partition_test"] == "noisy" and "noisy ε=0.69" in noisy["candidate"]
    assert noisy["noisy_bound"] == pytest.approx(math.exp(0.69) / 2)
    assert noisy["noisy_max_posterior"] == pytest.approx(min(1.0, math.exp(0.69) * noisy["max_breach"]))
    assert "noisy_bound" not in by[None] and "partition_test" not in by[None]["settings"]
    bad = cli("plan", "--config", root, "--rounds", "1", "--partition-epsilon", "0.9", "--jobs", "1")
    assert bad.returncode == 2 and "ε = 0.9; give sound, or ε in (0, 0.6931]" in bad.stderr
