"""Old spellings of ``kbcurate`` commands, rewritten to the current ones before parsing (issue 44).

``simulate`` chose its replay with flags and the developer benchmarks were top-level commands;
now the replays are ``simulate dense|ranker|screening`` and the benchmarks sit under ``bench``
(``bench match|speed|train|train-speed``). Scripts that use the old words keep working: the
command line is rewritten and one note per rewrite goes to stderr.

=============================================  ============================================
old spelling                                   new spelling
=============================================  ============================================
``simulate --screening ...``                   ``simulate screening ...``
``simulate --learner ranker ...``              ``simulate ranker ...``
``simulate [--learner dense] ...``             ``simulate dense ...``
``match-bench ...``                            ``bench match ...``
``bench [--backends ...] ...``                 ``bench speed ...``
``train-bench ...``                            ``bench train ...``
``train-speed ...``                            ``bench train-speed ...``
=============================================  ============================================
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from curation.cli.common import CommandParser

#: The replays of ``kbcurate simulate``.
REPLAYS = ("dense", "ranker", "screening")
#: The developer benchmarks of ``kbcurate bench`` (the last is the old ``bench``'s default).
BENCHMARKS = ("match", "speed", "train", "train-speed")
#: Old top-level command -> its ``bench`` sub-command.
RENAMED = {"match-bench": "match", "train-bench": "train", "train-speed": "train-speed"}

_HELP = ("-h", "--help")
_VALUED = ("-w", "--workspace")  # the options every command takes that carry a value
_FLAGS = ("-q", "--quiet", "-v", "--verbose")
_WORDS = ("command", "what", "action", "replay", "benchmark")  # dests of the command words


def _note(old: str, new: str, without: str = "") -> str:
    """The line printed on stderr for one rewrite (``without``: the word the old line lacked)."""
    lacking = f" without a {without}" if without else ""
    return (f"note: `kbcurate {old}`{lacking} is now `kbcurate {new}`; the old spelling still "
            "works")


def _first_word(rest: Sequence[str]) -> str | None:
    """The first token after the options every command takes (``-w WS``, ``-q``, ``-v``)."""
    skip = False
    for token in rest:
        if skip:
            skip = False
        elif token in _VALUED:
            skip = True
        elif not (token in _FLAGS or token.startswith(("--workspace=", "-w="))):
            return token
    return None


def _simulate(rest: list[str]) -> tuple[list[str], str | None]:
    """``simulate REST`` with the replay as its first word, and the note (None: unchanged)."""
    word = _first_word(rest)
    if word is None or word in REPLAYS or word in _HELP:
        return ["simulate", *rest], None
    learner, kept, i = "dense", [], 0
    while i < len(rest):
        token = rest[i]
        if token == "--learner" and i + 1 < len(rest) and rest[i + 1] in REPLAYS[:2]:
            learner, i = rest[i + 1], i + 2
            continue
        if token.startswith("--learner=") and token.split("=", 1)[1] in REPLAYS[:2]:
            learner = token.split("=", 1)[1]
        elif token != "--screening":
            kept.append(token)
        i += 1
    if "--screening" in rest:
        return ["simulate", "screening", *kept], _note("simulate --screening",
                                                       "simulate screening")
    if learner == "dense" and len(kept) == len(rest):  # no --learner: the old default
        return ["simulate", "dense", *kept], _note("simulate", "simulate dense", "replay")
    return ["simulate", learner, *kept], _note(f"simulate --learner {learner}",
                                               f"simulate {learner}")


def _bench(rest: list[str]) -> tuple[list[str], str | None]:
    """``bench REST`` with the benchmark as its first word, and the note (None: unchanged)."""
    word = _first_word(rest)
    if word in BENCHMARKS or word in _HELP:
        return ["bench", *rest], None
    return ["bench", "speed", *rest], _note("bench", "bench speed", "benchmark")


def rewrite(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The command line in the current spelling, and a note for each old word rewritten.

    Args:
        argv: The arguments after ``kbcurate``.

    Returns:
        The arguments to parse and the notes to print (empty when nothing was rewritten).
    """
    argv = list(argv)
    at = next((i for i, token in enumerate(argv) if not token.startswith("-")), None)
    if at is None:
        return argv, []
    head, command, rest = argv[:at], argv[at], argv[at + 1:]
    if command in RENAMED:
        sub = RENAMED[command]
        return [*head, "bench", sub, *rest], [_note(command, f"bench {sub}")]
    rewriters = {"bench": _bench, "simulate": _simulate}
    if command not in rewriters:
        return argv, []
    words, note = rewriters[command](rest)
    return [*head, *words], [note] if note else []


class TopParser(CommandParser):
    """The ``kbcurate`` parser: rewrites the old spellings (:func:`rewrite`) before parsing.

    Its sub-commands must be built with ``parser_class=CommandParser`` (they parse the words
    after the command, which are never rewritten).
    """

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        words, notes = rewrite(sys.argv[1:] if args is None else args)
        for note in notes:
            print(note, file=sys.stderr)
        return super().parse_known_args(words, namespace)

    def parse_args(self, args=None, namespace=None):  # type: ignore[override]
        """As argparse's, but an unknown flag's error names the command whose help lists the
        flags (an old ``simulate --screening --rounds 3`` now meets a replay without
        ``--rounds``)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            words = " ".join(str(w) for w in (getattr(parsed, d, None) for d in _WORDS) if w)
            self.error(f"unrecognized arguments: {' '.join(extras)} (kbcurate {words} --help "
                       "lists its flags)")
        return parsed
