"""How ``serialpub.yaml`` is read (serialpub.io.settings_yaml; docs/configuration.md, "How
the file is read"): bounded in size and in what aliases could expand to, and without YAML
1.1's coercions (``yes`` as true, ``010`` as 8). Every refusal is one line naming the file."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import cli, make_workspace, nested_aliases

from serialpub.config import MAX_CONFIG_BYTES as MAX_BYTES
from serialpub.config import load_config
from serialpub.config_render import dotted_keys
from serialpub.errors import InputError, quoted
from serialpub.workflow.dataset_inputs import read_dataset_inputs
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
    assert "alias '*a' is not allowed in a configuration file; write the value out" in proc.stdout
    assert f"line {first_alias}, column 8" in proc.stdout, proc.stdout


def test_a_single_alias_is_refused_too(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    _with(root, "quasi_identifiers:", "x: &qis [sex]\nquasi_identifiers: *qis\nold_quasi_identifiers:")
    assert "alias '*qis' is not allowed" in _refused(root)


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


#: a configuration's required settings, around the one a test puts a value under
_BASE = {"dataset": "clinic", "quasi_identifiers": "[sex]", "sensitive": "disease", "l": "2"}


def _config_with(folder: Path, key: str, text: str) -> tuple[Path, int, int]:
    """A ``serialpub.yaml`` in ``folder`` with ``text`` (YAML) as the value of the dotted
    ``key``; the file, and the line and column (from 1) where ``text`` starts."""
    top, _, inner = key.partition(".")
    lines = [f"{k}: {v}" for k, v in _BASE.items() if k != top]
    lines += [f"{top}:", f"  {inner}: {text}"] if inner else [f"{top}: {text}"]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "serialpub.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, len(lines), len(lines[-1]) - len(text) + 1


@pytest.mark.parametrize("depth", [6, 9])
@pytest.mark.parametrize("key", dotted_keys())
def test_nested_aliases_under_a_setting_are_refused_at_the_first_alias(tmp_path: Path, key: str, depth: int) -> None:
    """Wherever a publisher puts them, the aliases are refused before the first one is
    followed: nothing of the 9^depth expansion is ever built."""
    bomb = nested_aliases(depth)
    path, line, column = _config_with(tmp_path / "ws", key, bomb)
    with pytest.raises(InputError) as err:
        load_config(path.parent)
    assert str(err.value) == (
        f"{path}: not valid YAML (line {line}, column {column + bomb.index('*a')}: alias '*a' is not allowed in a "
        "configuration file; write the value out)"
    )


@pytest.mark.parametrize("depth", [6, 9])
def test_nested_aliases_in_the_configuration_stop_a_command(tmp_path: Path, depth: int) -> None:
    path, _, _ = _config_with(tmp_path / "ws", "protected_values", nested_aliases(depth))
    proc = cli("plan", "--config", path.parent, "--rounds", "1")
    assert proc.returncode == 2
    line = proc.stderr
    assert line.count("\n") == 1 and len(line.encode()) < 300 and "alias '*a' is not allowed" in line, line


@pytest.mark.parametrize(
    ("written", "tag"),
    [
        ("!!bool yes", "tag:yaml.org,2002:bool"),
        ("!!bool true", "tag:yaml.org,2002:bool"),
        ("!!str x", "tag:yaml.org,2002:str"),
        ("! true", "!"),
    ],
)
def test_a_tag_is_refused(tmp_path: Path, written: str, tag: str) -> None:
    """``!!bool yes`` is true to YAML 1.1 even where plain ``yes`` is refused: a tag brings
    back every coercion the loader leaves out."""
    root = _with(make_workspace(tmp_path / "ws"), "auto_approve: true", f"auto_approve: {written}")
    assert f"tag {tag!r} is not allowed in a configuration file; write the value without it" in _refused(root)


@pytest.mark.parametrize("written", ["!!int 0x3", "!!float 1:30"])
def test_a_tag_cannot_make_a_number(tmp_path: Path, written: str) -> None:
    root = _with(make_workspace(tmp_path / "ws"), "k_prime: 3", f"k_prime: {written}")
    assert "is not allowed in a configuration file" in _refused(root)


def test_a_key_that_is_a_list_is_one_line(tmp_path: Path) -> None:
    root = make_workspace(tmp_path / "ws")
    with (root / "serialpub.yaml").open("a", encoding="utf-8") as f:
        f.write("? [a, b]\n: 1\n")
    assert "a key is a list or a mapping; a key is a name" in _refused(root)


LONG = "v" * 5000


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        (
            "auto_approve: true",
            f"auto_approve: true\n  {'k' * 1000}: 1",
            f"setting {quoted('sign_off.' + 'k' * 1000)}: Extra inputs are not permitted",
        ),
        (
            "dilution: register",
            f"dilution: register\nnumeric: [{LONG}]",
            f"numeric lists {quoted(LONG)}, which is not a quasi-identifier",
        ),
        (
            "dilution: register",
            f"dilution: register\nregister: sql:{LONG}",
            f"register {quoted('sql:' + LONG)} reads the input database",
        ),
        (
            "auto_approve: true",
            f"auto_approve: {LONG}",
            f"setting 'sign_off.auto_approve': {quoted(LONG)} is not a boolean",
        ),
        (
            "dilution: register",
            f"dilution: register\nx: &{LONG} [1]\ny: *{LONG}",
            f"alias {quoted('*' + LONG)} is not allowed",
        ),
        (
            "dilution: register",
            f"dilution: register\n{'d' * 1000}: 1\n{'d' * 1000}: 2",
            f"setting {quoted('d' * 1000)} is given twice; keep one",
        ),
        ("dilution: register", f"dilution: !{LONG}!x register", "found undefined tag handle"),
    ],
)
def test_a_long_value_is_quoted_short(tmp_path: Path, old: str, new: str, says: str) -> None:
    """Every message about a setting quotes at most the start and end of what was written."""
    root = _with(make_workspace(tmp_path / "ws"), old, new)
    message = _refused(root)
    assert says in message, message


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("- cancer", f"- cancer\n- {LONG}", f"setting 'protected_values': {quoted(LONG)} not in the domain"),
        (
            "dilution: register",
            f"dilution: register\nreport:\n  categories:\n    chronic: [{LONG}]",
            f"report.categories.chronic names {quoted(LONG)}, not value(s)",
        ),
        (
            "dilution: register",
            f"dilution: register\nreport:\n  categories:\n    {'c' * 1000}: [hiv, {LONG}]",
            f"report.categories.{quoted('c' * 1000)[1:-1]} names {quoted(LONG)}, not value(s)",
        ),
    ],
)
def test_a_long_value_checked_against_the_domain_is_quoted_short(tmp_path: Path, old: str, new: str, says: str) -> None:
    root = _with(make_workspace(tmp_path / "ws"), old, new)
    with pytest.raises(InputError) as err:
        read_dataset_inputs(load_config(root))
    message = str(err.value)
    assert says in message, message
    # the message names two files of the workspace; apart from their folder, it is short
    assert "\n" not in message and len(message.replace(str(root), "ws")) <= 300, message
