"""Issue 44 ("Also"): ``simulate dense|ranker|screening`` each with only its own flags, the
developer benchmarks under ``bench match|speed|train|train-speed``, and the old spellings still
working with a note on stderr."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from curation.cli.legacy import rewrite
from curation.cli.main import build_parser, main

NOTE = "note: `kbcurate {}` is now `kbcurate {}`; the old spelling still works"


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


def _listed(parser: argparse.ArgumentParser) -> list[str]:
    """The command names a parser's help lists."""
    (action,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [choice.dest for choice in action._choices_actions]


def test_simulate_help_lists_the_three_replays(capsys) -> None:
    out = _help(capsys, "simulate")
    assert re.findall(r"^    (\S+) ", out, re.MULTILINE) == ["dense", "ranker", "screening"]
    assert "--recipe" not in out and "--recall-target" not in out  # the replays' own flags


DENSE_ONLY = ("--recipe", "--query-strategy", "--start", "--no-zero-shot", "--epochs",
              "--partial-mu", "--no-promote", "--evaluation")
RANKER_ONLY = ("--kb-share", "--label-splits")
SCREENING_ONLY = ("--recall-target", "--no-stop", "--split")
ROUNDS = ("--rounds", "--labels-per-round", "--labels-per-query", "--pool-depth")


@pytest.mark.parametrize("replay,own,foreign", [
    ("dense", DENSE_ONLY + ROUNDS, RANKER_ONLY + SCREENING_ONLY + ("--learner", "--screening")),
    ("ranker", RANKER_ONLY + ROUNDS + ("--tolerance", "--seed"),
     DENSE_ONLY + SCREENING_ONLY + ("--learner", "--screening")),
    ("screening", SCREENING_ONLY + ("--seed", "--out"),
     DENSE_ONLY + RANKER_ONLY + ROUNDS + ("--learner", "--screening", "--tolerance")),
])
def test_each_replay_lists_only_its_own_flags(capsys, replay, own, foreign) -> None:
    out = _help(capsys, "simulate", replay)
    flags = {word.strip("[],") for word in out.split() if word.startswith(("--", "[--"))}
    assert set(own) <= flags, set(own) - flags
    assert not set(foreign) & flags, set(foreign) & flags


def test_each_replay_keeps_the_defaults_of_the_old_command() -> None:
    def parse(*argv: str) -> argparse.Namespace:
        return build_parser().parse_args(["simulate", *argv, "--schema", "S"])

    dense, ranker, screening = parse("dense"), parse("ranker"), parse("screening")
    assert (dense.rounds, dense.labels_per_round, dense.labels_per_query, dense.pool_depth,
            dense.strategy, dense.evaluation, dense.tolerance) == (3, 50, 10, 100, "top", "pool",
                                                                   0.5)
    assert (ranker.rounds, ranker.labels_per_round, ranker.labels_per_query, ranker.pool_depth,
            ranker.kb_share, ranker.label_splits, ranker.seed) == (5, 10, 5, 100, 1.0, "all", 13)
    assert (screening.split, screening.recall_target, screening.no_stop, screening.seed) == (
        "heldout", 0.95, False, 13)


OLD_AND_NEW = [
    (["simulate", "-w", "WS", "--schema", "S", "--screening", "--split", "dev"],
     ["simulate", "screening", "-w", "WS", "--schema", "S", "--split", "dev"],
     NOTE.format("simulate --screening", "simulate screening")),
    (["simulate", "--schema", "S", "--learner", "ranker", "--rounds", "2", "--kb-share", "0.5"],
     ["simulate", "ranker", "--schema", "S", "--rounds", "2", "--kb-share", "0.5"],
     NOTE.format("simulate --learner ranker", "simulate ranker")),
    (["simulate", "--schema", "S", "--learner=ranker"], ["simulate", "ranker", "--schema", "S"],
     NOTE.format("simulate --learner ranker", "simulate ranker")),
    (["simulate", "--learner", "ranker", "--screening", "--schema", "S"],  # --screening won
     ["simulate", "screening", "--schema", "S"],
     NOTE.format("simulate --screening", "simulate screening")),
    (["simulate", "--schema", "S", "--learner", "dense", "--epochs", "2"],
     ["simulate", "dense", "--schema", "S", "--epochs", "2"],
     NOTE.format("simulate --learner dense", "simulate dense")),
    (["simulate", "-q", "--schema", "S", "--rounds", "1"],
     ["simulate", "dense", "-q", "--schema", "S", "--rounds", "1"],
     "note: `kbcurate simulate` without a replay is now `kbcurate simulate dense`; the old "
     "spelling still works"),
    (["match-bench", "F.txt", "--json", "--types", "gene"],
     ["bench", "match", "F.txt", "--json", "--types", "gene"],
     NOTE.format("match-bench", "bench match")),
    (["train-bench", "--task", "disease_gene", "--variant", "biohicl"],
     ["bench", "train", "--task", "disease_gene", "--variant", "biohicl"],
     NOTE.format("train-bench", "bench train")),
    (["train-speed", "-w", "WS", "--steps", "1"], ["bench", "train-speed", "-w", "WS", "--steps",
                                                   "1"],
     NOTE.format("train-speed", "bench train-speed")),
    (["bench", "-w", "WS", "--backends", "--split", "train"],  # not `bench train`
     ["bench", "speed", "-w", "WS", "--backends", "--split", "train"],
     "note: `kbcurate bench` without a benchmark is now `kbcurate bench speed`; the old "
     "spelling still works"),
    (["bench", "--docs", "0"], ["bench", "speed", "--docs", "0"],
     "note: `kbcurate bench` without a benchmark is now `kbcurate bench speed`; the old "
     "spelling still works"),
]


@pytest.mark.parametrize("old,new,note", OLD_AND_NEW, ids=[" ".join(o) for o, _, _ in OLD_AND_NEW])
def test_the_old_spelling_parses_to_the_new_command_with_a_note(capsys, old, new, note) -> None:
    assert rewrite(old) == (new, [note])
    assert rewrite(new) == (new, [])  # the new spelling is left alone
    parsed = vars(build_parser().parse_args(old))
    assert capsys.readouterr().err.strip() == note
    assert parsed == vars(build_parser().parse_args(new))
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("argv", [["simulate"], ["simulate", "-h"], ["simulate", "-w", "W"],
                                  ["bench", "--help"], ["bench", "-w", "W", "-q", "match", "F"],
                                  ["rank", "train", "--schema", "S"], ["--help"], []])
def test_words_that_are_not_old_spellings_are_left_alone(argv) -> None:
    assert rewrite(argv) == (argv, [])


def test_simulate_without_a_replay_names_the_three(capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["simulate", "-w", "WS"])
    assert stop.value.code == 2
    assert "REPLAY" in capsys.readouterr().err


def test_top_level_help_lists_the_user_commands_and_one_bench(capsys) -> None:
    out = _help(capsys)
    listed = _listed(build_parser())
    for gone in ("match-bench", "train-bench", "train-speed"):
        assert gone not in listed and gone not in out
    assert {"bench", "simulate", "init", "import", "train", "rank", "serve"} <= set(listed)
    assert listed[-1] == "bench"  # the developer benchmarks come last
    assert _listed(build_parser()._subparsers._group_actions[0].choices["bench"]) == [
        "match", "speed", "train", "train-speed"]


def test_the_old_and_new_match_bench_print_the_same(capsys, fixtures_dir) -> None:
    sample = str(fixtures_dir / "match_bench_sample.txt")
    assert main(["bench", "match", sample, "--json", "--types", "gene"]) == 0
    new = capsys.readouterr()
    assert main(["match-bench", sample, "--json", "--types", "gene"]) == 0
    old = capsys.readouterr()
    assert json.loads(old.out) == json.loads(new.out) and "gene" in json.loads(new.out)
    assert (new.err, old.err.strip()) == ("", NOTE.format("match-bench", "bench match"))


def test_a_flag_the_replay_lacks_names_the_help_to_read(capsys) -> None:
    """An old ``simulate --screening --rounds 3`` (``--rounds`` was ignored there) now fails,
    saying which command's help lists the flags."""
    with pytest.raises(SystemExit) as stop:
        main(["simulate", "--screening", "--rounds", "3", "--schema", "S"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(NOTE.format("simulate --screening", "simulate screening"))
    assert err.rstrip().endswith("error: unrecognized arguments: --rounds 3 (kbcurate simulate "
                                 "screening --help lists its flags)")
