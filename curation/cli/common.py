"""Helpers shared by the ``kbcurate`` entry point and its commands (no command imports here)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from curation.access.users import Role, User
from curation.store.config import WORKSPACE_ENV
from kb_sources.errors import CurationError


class CommandParser(argparse.ArgumentParser):
    """An argument parser whose leaf commands take options between their positionals.

    Plain argparse fills a command's optional positionals greedily from the first run of
    positionals, so ``kbcurate models activate -w WS VERSION`` stopped at ``-w`` and then refused
    ``VERSION`` ("unrecognized arguments"). A leaf command (one without sub-commands) parses
    intermixed (:meth:`argparse.ArgumentParser.parse_known_intermixed_args`): options may stand
    anywhere. Sub-parsers inherit the class (``add_subparsers`` builds them with the parent's).
    """

    _intermixing = False

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        nested = any(a.nargs in (argparse.PARSER, argparse.REMAINDER)
                     for a in self._get_positional_actions())
        if nested or self._intermixing:
            return super().parse_known_args(args, namespace)
        self._intermixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._intermixing = False


def workspace_path(args: argparse.Namespace) -> Path:
    """The workspace folder from ``--workspace`` or ``$KBCURATE_WORKSPACE``."""
    value = getattr(args, "workspace", None) or os.environ.get(WORKSPACE_ENV)
    if not value:
        raise CurationError(f"No workspace given: pass --workspace DIR or set {WORKSPACE_ENV}")
    return Path(value)


def print_json(data: object) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def add_backend_args(p: argparse.ArgumentParser) -> None:
    """``--backend`` / ``--precision`` of the dense encoder (default: the workspace's)."""
    from retrievers.backends import Backend, Precision, combination_names

    p.add_argument("--backend", choices=[b.value for b in Backend],
                   help="what encodes with the dense model (default: the workspace default, "
                        "torch unless kbcurate bench speed --backends --set-default changed "
                        "it); onnx and openvino need pip install 'kbcurate[onnx]' / "
                        "'kbcurate[openvino]'")
    p.add_argument("--precision", choices=[x.value for x in Precision],
                   help="number format of the encoder; pairs: " + ", ".join(combination_names()))


#: The command line acts as the local admin "cli" (audited under that name).
CLI_ADMIN = User("cli", Role.ADMIN)
