"""One value, two spellings (serialpub.io.spelling; docs/configuration.md, "Spelling of
sensitive values"): a sensitive domain listing ``hiv`` and ``HIV`` would leave the records
of one of them unprotected (or counted apart from the other). Such a domain is refused,
naming both lines; a snapshot or a protected value spelled another way than the domain is
refused with the domain's spelling; and the audit counts a published spelling of a
protected value as that value and fails the release."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from helpers import DISEASES, make_workspace, read_config, snapshot, state_of, write_config

from serialpub.analysis.audit import audit_workspace
from serialpub.config import load_config
from serialpub.errors import InputChecksFailed, InputError
from serialpub.io import spelling
from serialpub.io.spelling import spelling_key
from serialpub.workflow.publisher import Publisher


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("hiv", "HIV"),
        ("hiv", "ＨＩＶ"),  # full-width letters
        ("hiv", "hi\u200bv"),  # a zero-width space
        ("hiv positive", "HIV  Positive"),  # two spaces
        ("café", "cafe\u0301"),  # the same letter composed and decomposed
        ("straße", "STRASSE"),
    ],
)
def test_spellings_of_one_value_share_their_key(a: str, b: str) -> None:
    assert a != b and spelling_key(a) == spelling_key(b)


def test_different_values_keep_different_keys() -> None:
    keys = [spelling_key(v) for v in [*DISEASES, "hiv-1", "hiv 2", "h iv"]]
    assert len(set(keys)) == len(keys)


def _hierarchy_with(root: Path, spelling_of_hiv: str) -> Path:
    path = root / "hierarchies" / "disease.csv"
    path.write_text(path.read_text(encoding="utf-8") + f"{spelling_of_hiv};*\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("other", ["HIV", "ＨＩＶ", "Hiv\u200b"])
def test_a_sensitive_hierarchy_with_two_spellings_of_a_value_is_refused(tmp_path: Path, other: str) -> None:
    root = make_workspace(tmp_path / "ws")
    path = _hierarchy_with(root, other)
    before = state_of(root)
    with pytest.raises(InputError) as err:
        Publisher(load_config(root)).publish(snapshot(root, 1))
    message = str(err.value)
    assert message.startswith(f"{path}, lines 5 and 7: 'hiv' and {other!r} are one value spelled two ways"), message
    assert "keep one spelling" in message and "\n" not in message and len(message) <= 300
    assert state_of(root) == before


def test_a_domain_file_with_two_spellings_of_a_value_is_refused(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    (root / "hierarchies" / "disease.csv").unlink()
    (root / "domain.txt").write_text("flu\nhiv\ncold\n\nHIV\n", encoding="utf-8")
    config = read_config(root)
    config["sensitive_domain"] = "domain.txt"
    write_config(root, config)
    with pytest.raises(InputError, match=r"domain\.txt, lines 2 and 5: 'hiv' and 'HIV' are one value spelled two ways"):
        Publisher(load_config(root))


def test_a_protected_value_spelled_another_way_is_refused_with_the_domains_spelling(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws", protected_values=["ＨＩＶ", "cancer"])
    with pytest.raises(InputError, match=r"setting 'protected_values': 'ＨＩＶ'; did you mean 'hiv'\?"):
        Publisher(load_config(root))


def test_a_snapshot_value_spelled_another_way_is_refused_with_the_domains_spelling(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    frame = pd.read_csv(snapshot(root, 1), dtype=str, keep_default_na=False)
    frame.loc[2, "disease"] = "H\u200bIV"
    bad = root / "snapshot-0001.csv"
    frame.to_csv(bad, index=False)
    with pytest.raises(InputChecksFailed) as err:
        Publisher(load_config(root)).publish(bad)
    assert any("'H\\u200bIV' (line 4): did you mean 'hiv'?" in f for f in err.value.failures), err.value.failures


@pytest.mark.slow
def test_the_audit_fails_a_release_where_a_protected_value_escaped_under_another_spelling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release is made as before the domain was checked: ``HIV`` beside the protected
    ``hiv``, its records published as an unprotected value."""
    root = make_workspace(tmp_path / "ws")
    _hierarchy_with(root, "HIV")
    frame = pd.read_csv(snapshot(root, 1), dtype=str, keep_default_na=False)
    frame["disease"] = frame["disease"].where(frame["disease"] != "hiv", "HIV")
    frame.loc[[0, 1, 2], "disease"] = "HIV"
    frame.to_csv(snapshot(root, 1), index=False)
    with monkeypatch.context() as m:
        m.setattr(spelling, "check_distinct_spellings", lambda *args, **kwargs: None)
        m.setattr("serialpub.io.hierarchies.check_distinct_spellings", lambda *args, **kwargs: None)
        Publisher(load_config(root)).publish(snapshot(root, 1))
    result = audit_workspace(root)
    assert not result.ok
    [finding] = [f for f in result.findings if "'HIV'" in f]
    assert "published value 'HIV' is another spelling of protected value 'hiv'" in finding, finding
    assert result.max_p_value == "hiv"
    exact = audit_workspace(root, snapshots=root / "snapshots")
    assert not exact.ok and exact.mechanism_max_p is not None and exact.mechanism_max_p >= result.max_p - 1e-12


def test_no_value_of_the_demo_data_shares_a_key_with_another() -> None:
    """The normalization changes nothing the demo publishes: its values are pairwise distinct
    under the key, so no domain of it is refused and no audit counts two values as one."""
    from serialpub.datasets import adult
    from serialpub.io.hierarchies import read_sensitive_hierarchy

    for path in sorted(adult.hierarchy_dir().glob("*.csv")):
        read_sensitive_hierarchy(path, path.stem)  # raises on two spellings of one leaf
    values = adult.load_adult()[adult.SENSITIVE].astype(str).unique()
    assert len({spelling_key(v) for v in values}) == len(values) > 10
