"""Issue 28, item 16: ``--workspace`` / ``-q`` / ``-v`` count wherever they stand on the line.

``kbcurate schema -w WS add FILE`` once lost ``-w`` (the ``add`` parser's default None overwrote
it), so the command said "No workspace given" or, with ``$KBCURATE_WORKSPACE`` set, acted on that
other workspace. The first test walks the whole parser tree, so a command added later is covered
without editing this file.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from curation.cli.common import workspace_path
from curation.cli.main import build_parser, main

FIXTURES = Path(__file__).parent / "fixtures"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
              ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """(command words, leaf parser) of every runnable command, found by walking the parser."""
    children = _subparsers(parser)
    if not children and path:
        yield path, parser
    for name, child in children.items():
        yield from _commands(child, (*path, name))


def _required_args(parser: argparse.ArgumentParser) -> list[str]:
    """Placeholder values for the leaf's required positionals and options."""
    argv: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction | argparse._HelpAction):
            continue
        value = str(next(iter(action.choices))) if action.choices else "X"
        if not action.option_strings and action.nargs not in ("?", "*"):
            argv.append(value)
        elif action.option_strings and action.required:
            argv += [action.option_strings[0], value]
    return argv


COMMANDS = list(_commands(build_parser()))


def test_the_walk_finds_the_nested_commands():
    words = {" ".join(w) for w, _ in COMMANDS}
    assert {"schema add", "schema list", "import kb", "import docs", "settings", "stats",
            "users", "rank train"} <= words
    assert len(words) > 30


@pytest.mark.parametrize("words,leaf", COMMANDS, ids=[" ".join(c[0]) for c in COMMANDS])
def test_workspace_option_before_and_after_the_action(words, leaf, tmp_path, monkeypatch):
    """-w after the command word, after each sub-action, and at the end: all give WS."""
    if "--workspace" not in leaf._option_string_actions:
        pytest.skip(f"{' '.join(words)} takes no --workspace")
    given, other = tmp_path / "given", tmp_path / "other"
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(other))
    rest = _required_args(leaf)
    placements = [[*words[:i], "-w", str(given), "-q", *words[i:], *rest]
                  for i in range(1, len(words) + 1)]
    placements.append([*words, *rest, "--workspace", str(given), "--verbose"])
    for argv in placements:
        args = build_parser().parse_args(argv)
        assert workspace_path(args) == given, argv
        assert (args.quiet, args.verbose) == ("-q" in argv, "--verbose" in argv), argv


def _all_positionals(parser: argparse.ArgumentParser) -> list[str]:
    """A value for every positional of a leaf command, optional ones included."""
    out = []
    for action in parser._get_positional_actions():
        if isinstance(action, argparse._SubParsersAction):
            continue
        if action.choices:
            out.append(str(next(iter(action.choices))))
        else:
            out.append({int: "1", float: "0.5"}.get(action.type, "X"))
    return out


@pytest.mark.parametrize("words,leaf", COMMANDS, ids=[" ".join(c[0]) for c in COMMANDS])
def test_options_between_the_action_and_its_arguments(words, leaf, tmp_path):
    """Issue 35: ``kbcurate models activate -w WS VERSION`` said "unrecognized arguments:
    VERSION". Options (-w, -q, the command's own) may stand between any two positionals."""
    positionals = _all_positionals(leaf)
    rest = [arg for action in leaf._actions if action.option_strings and action.required
            for arg in (action.option_strings[0],
                        str(next(iter(action.choices))) if action.choices else "X")]
    options = ["-w", str(tmp_path), "-q"] if "--workspace" in leaf._option_string_actions \
        else []
    expected = vars(build_parser().parse_args([*words, *positionals, *rest, *options]))
    for i in range(1, len(positionals)):
        argv = [*words, *positionals[:i], *options, *rest, *positionals[i:]]
        assert vars(build_parser().parse_args(argv)) == expected, argv


def test_models_show_and_activate_take_the_workspace_before_the_version(tmp_path):
    args = build_parser().parse_args(["models", "activate", "-w", str(tmp_path), "PO-edel@1",
                                      "--reason", "better"])
    assert (args.action, args.version, args.workspace, args.reason) == (
        "activate", "PO-edel@1", str(tmp_path), "better")
    args = build_parser().parse_args(["models", "export", "PO-edel@1", "-w", str(tmp_path),
                                      "out"])
    assert (args.version, args.dest) == ("PO-edel@1", "out")


def test_defaults_without_the_options(monkeypatch):
    monkeypatch.delenv("KBCURATE_WORKSPACE", raising=False)
    args = build_parser().parse_args(["schema", "list"])
    assert (args.workspace, args.quiet, args.verbose) == (None, False, False)


def test_the_deepest_workspace_option_wins(tmp_path):
    args = build_parser().parse_args(["schema", "-w", "a", "add", "-w", "b", "f.toml"])
    assert args.workspace == "b"


# ------------------------------------------------------------------------ the commands themselves


@pytest.fixture()
def two_workspaces(tmp_path, monkeypatch, capsys):
    """WS (named with -w) and OTHER (in $KBCURATE_WORKSPACE), both initialised."""
    given, other = tmp_path / "given", tmp_path / "other"
    for ws in (given, other):
        assert main(["init", str(ws)]) == 0
    monkeypatch.setenv("KBCURATE_WORKSPACE", str(other))
    capsys.readouterr()
    return given, other


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_schema_add_before_the_action_acts_on_the_given_workspace(two_workspaces, capsys):
    given, other = two_workspaces
    schema = FIXTURES / "drug_target_schema.toml"
    code, out, err = _run(capsys, "schema", "-w", str(given), "add", str(schema))
    assert code == 0, err
    assert (given / "schemas" / "drug_target.toml").is_file()
    assert not (other / "schemas" / "drug_target.toml").exists()
    code, out, err = _run(capsys, "schema", "-w", str(given), "list")
    assert code == 0 and "drug_target" in out
    code, out, _ = _run(capsys, "schema", "-w", str(other), "list")
    assert code == 0 and "drug_target" not in out


def test_import_before_the_action_acts_on_the_given_workspace(two_workspaces, capsys):
    given, other = two_workspaces
    code, _, err = _run(capsys, "import", "-w", str(given), "kb", "civic",
                        str(FIXTURES / "civic_v2_sample.tsv"))
    assert code == 0, err
    counts = {}
    for ws in (given, other):
        code, out, _ = _run(capsys, "stats", "--json", "-w", str(ws))
        counts[ws] = json.loads(out)["relations_by_source"]
    assert counts[given].get("civic", 0) > 0
    assert counts[other] == {}


def test_settings_with_no_name_shows_the_settings(two_workspaces, capsys):
    given, _ = two_workspaces
    code, out, err = _run(capsys, "settings", "-w", str(given))
    assert (code, out.strip(), err) == (0, "blind-review: off", "")
    assert _run(capsys, "settings", "-w", str(given), "blind-review", "on")[0] == 0
    code, out, _ = _run(capsys, "settings", "blind-review", "-w", str(given))
    assert (code, out.strip()) == (0, "blind-review: on")
