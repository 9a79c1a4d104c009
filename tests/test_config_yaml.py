"""How ``serialpub.yaml`` is read (serialpub.io.settings_yaml; docs/configuration.md, "How
the file is read"): bounded in size and in what aliases could expand to, and without YAML
1.1's coercions (``yes`` as true, ``010`` as 8). Every refusal is one line naming the file."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import make_workspace

from serialpub.config import load_config
from serialpub.errors import InputError
from serialpub.io.settings_yaml import MAX_BYTES
from serialpub.workspaces import workspaces

#: a few hundred characters that YAML 1.1 expands to 9^9 (387 million) strings
ALIAS_BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n" for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
).join(['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n', ""])


def _with(root: Path, old: str, new: str) -> Path:
    path = root / "serialpub.yaml"
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new), encoding="utf-8")
    return root


def _refused(root: Path) -> str:
    with pytest.raises(InputError) as err:
        load_config(root)
    message = str(err.value)
    assert "\n" not in message and len(message) <= 300 and str(root / "serialpub.yaml") in message, message
    return message


def test_an_alias_bomb_is_refused_without_being_expanded(tmp_path: Path) -> None:
    """The configuration is loaded in a process limited in address space (RLIMIT_AS below): before
    aliases were refused, the expansion (json.dumps of the settings) ran out of it."""
    assert len(ALIAS_BOMB) < 500
    root = make_workspace(tmp_path / "ws")
    first_alias = (root / "serialpub.yaml").read_text(encoding="utf-8").count("\n") + 2  # the bomb's line 2
    with (root / "serialpub.yaml").open("a", encoding="utf-8") as f:
        f.write(ALIAS_BOMB)
    code = textwrap.dedent(
        """
        import resource, sys
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        from serialpub.config import load_config
        from serialpub.errors import InputError
        try:
            load_config(__import__("pathlib").Path(sys.argv[1]))
        except InputError as exc:
            print("REFUSED", exc)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("REFUSED "), proc.stdout
    assert "alias *a is not allowed in a settings file; write the value out" in proc.stdout
    assert f"line {first_alias}, column 8" in proc.stdout, proc.stdout


def test_a_single_alias_is_refused_too(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    _with(root, "quasi_identifiers:", "x: &qis [sex]\nquasi_identifiers: *qis\nold_quasi_identifiers:")
    assert "alias *qis is not allowed" in _refused(root)


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "y", "Yes", "ON", "True", "FALSE"])
def test_only_true_and_false_are_booleans(tmp_path: Path, word: str) -> None:
    """YAML 1.1 reads ``auto_approve: yes`` (unquoted) as true: a release would be approved
    with nobody having written ``true``."""
    root = _with(make_workspace(tmp_path / "ws"), "auto_approve: true", f"auto_approve: {word}")
    message = _refused(root)
    assert f"setting 'sign_off.auto_approve': '{word}' is not a boolean; write true or false" in message, message


def test_true_and_false_still_are(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    assert load_config(root).config.sign_off.auto_approve is True
    _with(root, "auto_approve: true", "auto_approve: false")
    assert load_config(root).config.sign_off.auto_approve is False


@pytest.mark.parametrize("written", ["010", "0x3", "1:30", "1_0"])
def test_integers_are_decimal_only(tmp_path: Path, written: str) -> None:
    """YAML 1.1 reads 010 as 8, 0x3 as 3, 1:30 as 90 and 1_0 as 10."""
    root = _with(make_workspace(tmp_path / "ws"), "k_prime: 3", f"k_prime: {written}")
    assert "setting 'k_prime'" in _refused(root)


def test_an_oversized_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    with (root / "serialpub.yaml").open("a", encoding="utf-8") as f:
        f.write("# " + "x" * MAX_BYTES + "\n")
    assert "larger than 1024 KiB" in _refused(root)


def test_deep_nesting_is_one_line(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    with (root / "serialpub.yaml").open("a", encoding="utf-8") as f:
        f.write("x: " + "[" * 50_000 + "]" * 50_000 + "\n")
    assert "nested too deeply" in _refused(root)


def test_a_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    with (root / "serialpub.yaml").open("ab") as f:
        f.write(b"# \xff\n")
    assert "not UTF-8 text" in _refused(root)


def test_workspaces_can_skip_a_bad_one(tmp_path: Path) -> None:
    """What the DAG file lists: the good workspaces, and one line per bad one."""
    good = make_workspace(tmp_path / "good")
    bad = _with(make_workspace(tmp_path / "bad"), "auto_approve: true", "auto_approve: yes")
    listed = f"{bad}:{good}"
    with pytest.raises(InputError, match="not a boolean"):
        workspaces(listed)
    skipped: list[str] = []
    assert workspaces(listed, skipped) == {"clinic": good.resolve()}
    [line] = skipped
    assert line == (
        f"workspace {bad} skipped: {bad / 'serialpub.yaml'}: setting 'sign_off.auto_approve': 'yes' is not a "
        "boolean; write true or false"
    )
