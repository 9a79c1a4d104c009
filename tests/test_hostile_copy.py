"""A public copy is untrusted input (docs/data-users.md): a copy rewritten by someone else
and signed again with their own key, its keys/*.pub replaced, so that every signature
verifies. Names in its manifests are checked before they become paths
(serialpub.io.names), the shape of its tables is checked once when it is read
(serialpub.analysis.reader), and every command names the fingerprint of the key it
verified against, which a data user pins with --key-fingerprint."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
from helpers import cli

from serialpub.errors import InputError
from serialpub.io import signing
from serialpub.io.series_records import CHECKPOINT_FILE, CHECKPOINT_SIGNATURE, Checkpoint

Edit = Callable[[int, dict[str, Any]], None]
TRAVERSAL = "../../../../etc/passwd"


def _store(copy: Path) -> Path:
    return copy / "releases" / "clinic"


def _data_files(copy: Path) -> list[Path]:
    return sorted(_store(copy).glob("release-*/data.parquet"))


def _forge(copy: Path, edit: Edit | None = None) -> str:
    """Sign every manifest of ``copy`` again, after ``edit`` (release number, manifest),
    with a key of the forger's own: the data checksums follow the files, the chain and the
    checkpoint follow the manifests, and keys/publisher.pub becomes the forger's. Every
    signature then verifies; returns the forger's key as a manifest names it."""
    key_path = copy.parent / "forger.key"
    if not key_path.exists():
        signing.create_key_pair(key_path)
    key = signing.load_private_key(key_path)
    shutil.copyfile(key_path.with_suffix(".pub"), copy / "keys" / "publisher.pub")
    text = ""
    for folder in sorted(_store(copy).glob("release-*")):
        manifest = json.loads((folder / "manifest.json").read_text())
        manifest["sha256"]["data.parquet"] = hashlib.sha256((folder / "data.parquet").read_bytes()).hexdigest()
        if edit is not None:
            edit(manifest["release"], manifest)
        manifest["signing_key"] = signing.public_key_text(key)
        if text:
            manifest["previous_manifest_sha256"] = hashlib.sha256(text.encode()).hexdigest()
        text = json.dumps(manifest, indent=2) + "\n"
        (folder / "manifest.json").write_text(text)
        (folder / "manifest.sig").write_text(signing.sign(key, text.encode()))
    checkpoint = Checkpoint.parse((_store(copy) / CHECKPOINT_FILE).read_bytes(), "checkpoint")
    newest = hashlib.sha256(text.encode()).hexdigest()
    checkpoint = checkpoint.model_copy(update={"manifest_sha256": newest, "signing_key": signing.public_key_text(key)})
    record = checkpoint.to_json()
    (_store(copy) / CHECKPOINT_FILE).write_text(record)
    (_store(copy) / CHECKPOINT_SIGNATURE).write_text(signing.sign(key, record.encode()))
    return signing.public_key_text(key)


def _one_line(copy: Path, *command: str | Path) -> str:
    """``command`` on ``copy`` refused with exit 2 and one line, never an internal error."""
    done = cli(*command[:1], copy, *command[1:])
    assert done.returncode == 2, (command, done.stdout, done.stderr)
    assert "internal error" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


def test_a_forged_copy_verifies_without_a_pin(fresh: Path) -> None:
    """The premise of the cases below: re-signed by the forger, an unedited copy verifies,
    so every refusal below comes from the check it names, not from a signature."""
    _forge(fresh)
    assert cli("query", fresh).returncode == 0


# ---------------------------------------------------------------------------------------
# names from a manifest or a register version never become paths


def _rename_qi(n: int, m: dict[str, Any]) -> None:
    old = m["quasi_identifiers"][0]
    m["quasi_identifiers"][0] = TRAVERSAL
    m["sha256"]["hierarchies"][TRAVERSAL] = m["sha256"]["hierarchies"].pop(old)


NAMES: dict[str, tuple[Edit, str]] = {
    "a QI name": (_rename_qi, "'quasi_identifiers.0' holds a path separator"),
    "the sensitive column": (lambda n, m: m.update(sensitive=TRAVERSAL), "'sensitive' holds a path separator"),
    "an absolute numeric QI": (
        lambda n, m: m.update(numeric_quasi_identifiers=["/etc/passwd"]),
        "'numeric_quasi_identifiers.0' holds a path separator",
    ),
    "a NUL in a QI name": (
        lambda n, m: m["quasi_identifiers"].__setitem__(0, "age\x00"),
        "'quasi_identifiers.0' holds a control character",
    ),
    "'..' as a QI name": (
        lambda n, m: m["quasi_identifiers"].__setitem__(0, ".."),
        "'quasi_identifiers.0' is a relative folder",
    ),
    "sha256.register": (
        lambda n, m: m["sha256"].update(register=TRAVERSAL),
        "'sha256.register' is not a sha256 (64 hex digits)",
    ),
    "a sha256.hierarchies key": (
        lambda n, m: m["sha256"]["hierarchies"].update({TRAVERSAL: "0" * 64}),
        "a key of 'sha256.hierarchies' holds a path separator",
    ),
    "a sha256.hierarchies value": (
        lambda n, m: m["sha256"]["hierarchies"].update(sex=TRAVERSAL),
        "'sha256.hierarchies.sex' is not a sha256",
    ),
    "a report file name": (
        lambda n, m: m.update(report={TRAVERSAL: "0" * 64}),
        "a key of 'report' holds a path separator",
    ),
}


@pytest.mark.parametrize("case", list(NAMES))
def test_a_manifest_name_that_is_a_path_is_refused_naming_the_file_and_the_key(fresh: Path, case: str) -> None:
    """Before: a QI name or sha256.register of '../../../../etc/passwd' was joined into the
    paths the reader opened (hierarchies/../../../../etc/passwd.csv)."""
    edit, named = NAMES[case]
    _forge(fresh, edit)
    for command in (["query"], ["expand", "--out", str(fresh / "tables")], ["audit"]):
        err = _one_line(fresh, *command)
        assert "release-0001/manifest.json: " in err and named in err, err
        assert "got " in err and len(err) < 300 + len(str(fresh)), err
    assert not (fresh / "tables").exists()


def test_a_register_version_whose_parent_is_a_path_is_refused(fresh: Path) -> None:
    """A register version names its parent version in its Parquet metadata: before, the
    parent '../../../../etc/passwd' was opened as registers/../../../../etc/passwd.parquet."""
    (fresh / "register.csv").write_text("id,sex,zipcode,age\n")  # read the kept version, not the file
    (version,) = (fresh / "registers").glob("*.parquet")
    table = pq.read_table(version)
    meta = {k.decode(): v.decode() for k, v in pq.read_metadata(version).metadata.items() if not k.startswith(b"ARROW")}
    pq.write_table(table.replace_schema_metadata({**meta, "parent": TRAVERSAL}), version)
    for command in (["query"], ["audit"]):
        err = _one_line(fresh, *command)
        assert f"{version.name}: its parent version (metadata 'parent') '{TRAVERSAL}' is not a sha256" in err, err


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("a/b", "path separator"),
        ("a\\b", "path separator"),
        ("..", "relative folder"),
        ("C:x", "drive"),
        ("/x", "path separator"),
        ("x\x00", "control character"),
        ("", "is empty"),
        ("x" * 256, "longer than"),
    ],
)
def test_one_checker_refuses_what_is_not_a_plain_name(name: str, problem: str) -> None:
    from serialpub.io.names import check_name, name_problem

    assert problem in (name_problem(name) or "")
    with pytest.raises(InputError, match=r"^m\.json: quasi-identifier .* cannot be used$"):
        check_name(name, "m.json", "quasi-identifier")
    for fine in ("age", "native-country", "a..b", "salary class", "ä" * 127):
        assert name_problem(fine) is None and check_name(fine, "m.json", "x") == fine


def test_serialpub_yaml_holds_its_columns_to_the_rule_its_manifests_are_read_with() -> None:
    from serialpub.config import config_of

    base = {"dataset": "clinic", "quasi_identifiers": ["sex", "age"], "sensitive": "disease", "l": 2, "k_prime": 3}
    for bad in ({"quasi_identifiers": ["sex", "../age"]}, {"sensitive": "a/b"}):
        with pytest.raises(InputError, match="holds a path separator"):
            config_of({**base, **bad}, "serialpub.yaml")
    assert config_of(base, "serialpub.yaml").quasi_identifiers == ["sex", "age"]


# ---------------------------------------------------------------------------------------
# the shape of every table, checked once when the copy is read


def _rewrite_data(change: Callable[[pd.DataFrame], pd.DataFrame]) -> Callable[[Path], None]:
    def rewrite(copy: Path) -> None:
        for path in _data_files(copy):
            change(pd.read_parquet(path)).to_parquet(path, index=False)

    return rewrite


def _unknown_label(frame: pd.DataFrame) -> pd.DataFrame:
    frame["zipcode"] = frame["zipcode"].astype(str)
    frame.loc[0, "zipcode"] = "99999"
    return frame


def _register_without(column: str) -> Callable[[Path], None]:
    def edit(copy: Path) -> None:
        shutil.rmtree(copy / "registers")
        frame = pd.read_csv(copy / "register.csv", dtype=str)
        frame.drop(columns=[column]).to_csv(copy / "register.csv", index=False)

    return edit


def _register_version(content: Callable[[Path], None]) -> Callable[[Path], None]:
    def edit(copy: Path) -> None:
        (copy / "register.csv").write_text("id,sex,zipcode,age\n")  # read the kept version
        content(next((copy / "registers").glob("*.parquet")))

    return edit


SHAPES: dict[str, tuple[Callable[[Path], None], str]] = {
    "a QI column missing": (
        _rewrite_data(lambda f: f.drop(columns=["age"])),
        "release-0001/data.parquet: lacks column(s) age named in the manifest",
    ),
    "the sensitive column missing": (
        _rewrite_data(lambda f: f.drop(columns=["disease"])),
        "release-0001/data.parquet: lacks column(s) disease named in the manifest",
    ),
    "an identifier added": (
        _rewrite_data(lambda f: f.assign(id="p001")),
        "release-0001/data.parquet: has column(s) id that the manifest does not name",
    ),
    "no records": (_rewrite_data(lambda f: f.iloc[:0]), "release-0001/data.parquet: has 0 records, the manifest says"),
    "empty labels": (
        _rewrite_data(lambda f: f.assign(sex=None)),
        "release-0001/data.parquet: column 'sex' is empty in",
    ),
    "a label off the hierarchy": (
        _rewrite_data(_unknown_label),
        "release-0001/data.parquet: record 1: zipcode = '99999' is not a node of hierarchies/zipcode.csv",
    ),
    "a register without a QI": (_register_without("age"), "register.csv: no column(s) age; the register"),
    "a register without the id": (_register_without("id"), "register.csv: no column(s) id; the register"),
    "a register version that is no Parquet file": (
        _register_version(lambda p: p.write_bytes(b"garbage")),
        ".parquet: not a register version (ArrowInvalid); registers/ was altered",
    ),
    "a register version without its operations": (
        _register_version(lambda p: pq.write_table(pq.read_table(p).drop_columns(["start"]), p)),
        ".parquet: not a readable register version",
    ),
}


def _register_sha(copy: Path) -> Edit:
    """The manifests name today's register.csv of ``copy``: the forger edits it too."""
    sha = hashlib.sha256((copy / "register.csv").read_bytes()).hexdigest()
    return lambda n, m: m["sha256"].update(register=sha)


@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.slow) if c == "an identifier added" else c for c in SHAPES]
)
def test_a_copy_of_the_wrong_shape_is_one_line_naming_the_file(fresh: Path, case: str) -> None:
    """Before: a hostile copy missing a column ended with exit 1 and 'internal error:
    KeyError'; an empty label or a label off the hierarchy was read as no region; a broken
    register version was 'internal error: ArrowInvalid'."""
    change, named = SHAPES[case]
    change(fresh)
    _forge(fresh, _register_sha(fresh) if case.startswith("a register without") else None)
    for command in (["query"], ["expand", "--out", str(fresh / "tables")]):
        err = _one_line(fresh, *command)
        assert named in err, err
    assert not (fresh / "tables").exists()
    audited = cli("audit", fresh)  # the audit fails the copy, or refuses what it cannot read
    assert audited.returncode in (1, 2) and "internal error" not in audited.stderr, audited.stderr


def test_the_library_reader_raises_its_documented_error(fresh: Path) -> None:
    from serialpub.analysis.reader import open_releases

    SHAPES["a QI column missing"][0](fresh)
    _forge(fresh)
    with pytest.raises(InputError, match=r"data\.parquet: lacks column"):
        open_releases(fresh)


# ---------------------------------------------------------------------------------------
# the key: named, and pinned by its fingerprint


def _fingerprint(pub: Path) -> str:
    from serialpub.analysis.audit.integrity import read_public_key
    from serialpub.analysis.audit.keys import fingerprint

    return fingerprint(read_public_key(pub))


def test_the_fingerprint_is_openssh_s() -> None:
    """A known answer: ``ssh-keygen -l`` of the Ed25519 key whose raw key is the numbers 0 to 31."""
    from serialpub.analysis.audit.keys import fingerprint, parse_fingerprint

    key = "ed25519:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
    assert fingerprint(key) == "SHA256:ZkAslGjFiUHdGf/WUL8rQvkib4PTvQatUV0OUQSncCA"
    assert parse_fingerprint(" ZkAslGjFiUHdGf/WUL8rQvkib4PTvQatUV0OUQSncCA ") == fingerprint(key)
    with pytest.raises(InputError, match="give the publisher's key fingerprint"):
        parse_fingerprint("SHA256:abc")


@pytest.mark.slow
def test_query_expand_and_audit_name_the_key_they_verified_against(fresh: Path) -> None:
    """Before: 'Verified: 2 release(s), signatures and manifest chain', naming no key."""
    publisher = _fingerprint(fresh / "keys" / "publisher.pub")
    asked = cli("query", fresh)
    assert asked.returncode == 0, asked.stderr
    said = " ".join(asked.stdout.split())
    assert f"signatures by key {publisher} (keys/publisher.pub of the copy)" in said, said
    assert json.loads(cli("query", fresh, "--json").stdout)["key_fingerprint"] == publisher
    expanded = cli("expand", fresh, "--out", fresh / "tables")
    assert expanded.returncode == 0 and publisher in expanded.stdout, expanded.stdout
    audited = cli("audit", fresh)
    assert audited.returncode == 0 and publisher in " ".join(audited.stdout.split()), audited.stdout
    pinned = cli("query", fresh, "--key-fingerprint", publisher)
    assert pinned.returncode == 0, pinned.stderr
    assert f"signatures by key {publisher} (pinned with --key-fingerprint)" in " ".join(pinned.stdout.split())
    audited = cli("audit", fresh, "--key-fingerprint", publisher)
    assert audited.returncode == 0 and "verdict: PASS" in audited.stdout, audited.stdout
    assert f"the key you pinned (--key-fingerprint), {publisher}" in " ".join(audited.stdout.split())


def test_a_copy_signed_again_by_another_key_is_refused_under_the_pinned_fingerprint(fresh: Path) -> None:
    """Before: a copy re-signed with another key, keys/*.pub replaced, verified silently.
    Now the key it verified under is printed (not the publisher's), and with the
    publisher's fingerprint pinned the copy is refused (query, expand) or fails (audit)."""
    publisher = _fingerprint(fresh / "keys" / "publisher.pub")
    _forge(fresh)
    forger = _fingerprint(fresh / "keys" / "publisher.pub")
    unpinned = cli("query", fresh)
    assert unpinned.returncode == 0 and forger in unpinned.stdout.replace("\n", "") and publisher not in unpinned.stdout
    for command in (["query"], ["expand", "--out", str(fresh / "tables")]):
        err = _one_line(fresh, *command, "--key-fingerprint", publisher)
        assert f"no key of this series has the fingerprint {publisher} you pinned" in err, err
        assert f"signed by {forger}" in err, err
    assert not (fresh / "tables").exists()
    audited = cli("audit", fresh, "--key-fingerprint", publisher)
    out = " ".join(audited.stdout.split())
    assert audited.returncode == 1 and "verdict: FAIL" in out and f"fingerprint {publisher} you pinned" in out, out


def test_a_public_key_and_a_fingerprint_that_disagree_are_refused(fresh: Path) -> None:
    other = signing.create_key_pair(fresh.parent / "other.key")
    pub = fresh / "keys" / "publisher.pub"
    for command in ("query", "audit"):
        err = _one_line(fresh, command, "--public-key", str(other), "--key-fingerprint", _fingerprint(pub))
        assert f"other.pub: holds the key {_fingerprint(other)}, not the {_fingerprint(pub)}" in err, err
        err = _one_line(fresh, command, "--key-fingerprint", "MD5:ab:cd")
        assert "--key-fingerprint 'MD5:ab:cd': give the publisher's key fingerprint" in err, err


def test_keygen_prints_the_fingerprint(tmp_path: Path) -> None:
    done = cli("keygen", "--out", tmp_path / "k.key")
    assert done.returncode == 0, done.stderr
    assert f"fingerprint: {_fingerprint(tmp_path / 'k.pub')}" in done.stdout


# ---------------------------------------------------------------------------------------
# messages


@pytest.mark.parametrize("written", ["salary-class=<=50K|>50K", "salary-class=>50K|<=50K", "salary-class = <=50K"])
def test_a_label_that_begins_like_a_range_is_a_label(written: str) -> None:
    """Before: '<=50K|>50K' was read as the half range '<= 50K|>50K' and refused, while
    '>50K|<=50K' worked."""
    import numpy as np

    from anonymizer.hierarchy import Hierarchy
    from serialpub.analysis.querying import parse_condition

    h = Hierarchy.from_rows("salary-class", [(1, ["<=50K", "*"]), (2, [">50K", "*"])], "salary-class.csv")
    mask = parse_condition(written, ["salary-class"]).mask(h)
    assert mask.tolist() == ([True, True] if "|" in written else [True, False])
    ages = Hierarchy.from_rows("age", [(i, [str(a), "*"]) for i, a in enumerate(range(20, 30), 1)], "age.csv")
    assert np.flatnonzero(parse_condition("age=<=24", ["age"]).mask(ages)).tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(InputError, match=r"'<=x' is not a value of salary-class"):
        parse_condition("salary-class=<=50K|<=x", ["salary-class"]).mask(h)


def test_a_register_message_names_the_copy_s_folder_once(fresh: Path) -> None:
    """Before, with the copy given as a relative path: 'received/received/register.csv:
    ..., and received/registers/<sha>.parquet is missing'."""
    shutil.rmtree(fresh / "registers")
    (fresh / "register.csv").write_text("id,sex,zipcode,age\n")
    done = cli("query", "received", cwd=fresh.parent)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("received") == 1, done.stderr
    assert "received/register.csv: the register differs from the one release 1 was published with" in done.stderr
    assert "and registers/" in done.stderr and ".parquet is missing" in done.stderr


def test_a_missing_evidence_file_is_named_in_plain_words(published_once: Path, tmp_path: Path) -> None:
    """Before: '.../report.html is missing release 1's manifest lists (sha256)'."""
    report = published_once / "releases" / "clinic" / "release-0001" / "report.html"
    report.unlink()
    done = cli("public-copy", "--config", published_once, "--out", tmp_path / "copy")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{report} is missing, though release 1's manifest lists it; restore it from the backup" in done.stderr
