"""Typed identities, parsed and printed in one place (issue 27 item 3).

* :class:`ModelVersionId` names a trained version: a dense model version of the registry
  (``disease_gene-edel@3``, :mod:`curation.store.models`) or a learned-ranker version
  (``disease_gene-ranker@2``, :mod:`curation.store.rankers`): schema, recipe (or kind) and n.
* :class:`RetrieverChoice` names what ranks a search: a registered retriever, optionally over a
  model version or following the schema's active one, optionally with the entity-aware rerank,
  or the learned ranker. Its string form is the app's menu entry and the CLI's ``--retriever``
  value: ``bm25``, ``bm25+rerank``, ``dense · disease_gene-edel@2``, ``hybrid · active``,
  ``ranked · active``, ``ranked · disease_gene-ranker@4``.

Strings that label rows hold (a dense hit's label ``dense:disease_gene-edel-2-ab12cd34ef56-<digest>
+rerank``, ``ranked · PO-ranker@1``, the simulation's ``PO-edel@2``) are read by
:meth:`ModelVersionId.find`, which finds the version named anywhere in them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb_sources.errors import CurationError

__all__ = ["ACTIVE", "RANKED", "RERANK", "VERSION_SEP", "ModelVersionId", "RetrieverChoice"]

#: Separates a retriever from a model version in a retriever choice ("dense · PO-edel@2").
VERSION_SEP = " · "
#: The version part of a choice that follows the schema's active version ("dense · active").
ACTIVE = "active"
#: The suffix of a choice reranked by the entities it mentions ("bm25+rerank").
RERANK = "+rerank"
#: The learned ranker's retriever name ("ranked · active").
RANKED = "ranked"

_PART = r"[A-Za-z0-9][A-Za-z0-9_.]*"
_VERSION = re.compile(rf"(?<![A-Za-z0-9_.-])({_PART}(?:-{_PART})*)-({_PART})@(\d+)(?![0-9])")
#: A dense hit's label: ``dense:`` + the encoder's cache slug of a registry version, where
#: ``<schema>-<recipe>@<n>:<sha12>`` became ``<schema>-<recipe>-<n>-<sha12>`` (then an optional
#: ``-<backend>-<precision>`` and ``-<digest12>``; retrievers/encoder.py, ``model_id``).
_SLUG = re.compile(rf"\bdense:({_PART}(?:-{_PART})*?)-({_PART})-(\d+)-[0-9a-f]{{12}}-")


@dataclass(frozen=True, order=True)
class ModelVersionId:
    """``<schema>-<recipe>@<n>``: a dense model version or a ranker version (recipe "ranker").

    Attributes:
        schema: The schema it was trained for ("disease_gene").
        recipe: The training recipe ("edel", "bica", "biohicl", a plug-in) or "ranker".
        n: The version number, counting up per schema and recipe.
    """

    schema: str
    recipe: str
    n: int

    def __str__(self) -> str:
        return f"{self.schema}-{self.recipe}@{self.n}"

    @property
    def name(self) -> str:
        """The registry name without the number ("disease_gene-edel")."""
        return f"{self.schema}-{self.recipe}"

    @property
    def is_ranker(self) -> bool:
        return self.recipe == "ranker"

    @classmethod
    def parse(cls, text: str) -> ModelVersionId:
        """The identity written as ``<schema>-<recipe>@<n>``.

        Raises:
            CurationError: ``text`` is not of that form (the message shows an example).
        """
        found = _VERSION.fullmatch(str(text).strip())
        if found is None:
            raise CurationError(f"{text!r} is not a model version; expected "
                                "<schema>-<recipe>@<n>, e.g. 'disease_gene-edel@2' (kbcurate "
                                "models list)")
        return cls(found[1], found[2], int(found[3]))

    @classmethod
    def find(cls, text: str | None) -> ModelVersionId | None:
        """The version named anywhere in ``text`` (a label row's ``model_version``, a hit's
        retriever label, a menu entry), or None when it names none (``bm25``, ``hybrid:rrf``)."""
        found = _VERSION.search(str(text or "")) or _SLUG.search(str(text or ""))
        return None if found is None else cls(found[1], found[2], int(found[3]))


@dataclass(frozen=True)
class RetrieverChoice:
    """What ranks a search (see the module docstring for the string forms).

    Attributes:
        retriever: A registered retriever ("bm25", "dense", "hybrid") or "ranked".
        version: The model version it runs over, ``"active"`` for the schema's active one at
            search time, or None (no version: bm25, or dense over the packaged model).
        rerank: Reranked by the entities each abstract mentions.
    """

    retriever: str
    version: ModelVersionId | str | None = None
    rerank: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.version, str) and self.version != ACTIVE:
            object.__setattr__(self, "version", ModelVersionId.parse(self.version))
        if not self.retriever or VERSION_SEP.strip() in self.retriever:
            raise CurationError(f"{self.retriever!r} is not a retriever name")

    def __str__(self) -> str:
        text = self.retriever if self.version is None else (
            f"{self.retriever}{VERSION_SEP}{self.version}")
        return text + (RERANK if self.rerank else "")

    @property
    def follows_active(self) -> bool:
        """Follows the schema's active version (pinned once per search)."""
        return self.version == ACTIVE

    @property
    def is_ranked(self) -> bool:
        return self.retriever == RANKED

    def pinned(self, active: ModelVersionId | str) -> RetrieverChoice:
        """This choice with ``active`` in place of "active" (unchanged when it names a version)."""
        if not self.follows_active:
            return self
        return RetrieverChoice(self.retriever, active, self.rerank)

    @classmethod
    def parse(cls, text: str) -> RetrieverChoice:
        """A choice from its string form ("dense · disease_gene-edel@2", "bm25+rerank").

        Raises:
            CurationError: An empty name, or a version part that is neither "active" nor
                ``<schema>-<recipe>@<n>``.
        """
        text = str(text).strip()
        rerank = text.endswith(RERANK)
        if rerank:
            text = text[:-len(RERANK)].rstrip()
        name, sep, version = text.partition(VERSION_SEP)
        if not sep and "·" in name:  # typed by hand without the spaces
            name, _, version = name.partition("·")
        name, version = name.strip(), version.strip()
        if not name:
            raise CurationError(f"{text!r} names no retriever; expected e.g. 'bm25', "
                                "'bm25+rerank' or 'dense · disease_gene-edel@2'")
        return cls(name, version or None, rerank)
