"""Which query groups a model version learned curators' labels of (issue 44).

A dense or cross version trained on labels of dev or test relations keeps their query groups in
its manifest (``examples.labels.learned_groups``). Every measurement that reads such a version
leaves those groups' held-out queries out: the dense gate
(:mod:`curation.training.round_gate`), the ranker's rounds for the dense and cross versions its
features read (:mod:`curation.training.round_measure`) and the choice of a schema's default
(:mod:`curation.evaluation.best`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from curation.store.models import Models
from curation.store.workspace import Workspace


def learned_groups(manifest: Mapping[str, Any] | None) -> set[str]:
    """The query groups a dense version learned labels of (its manifest's
    ``examples.labels.learned_groups``; none for versions trained before labels of dev and test
    relations trained, which held those labels out)."""
    labels = ((manifest or {}).get("examples") or {}).get("labels") or {}
    groups = labels.get("learned_groups") if isinstance(labels, dict) else None
    return {str(g) for g in groups} if isinstance(groups, list) else set()


def feature_versions(manifest: Mapping[str, Any] | None) -> list[str]:
    """The dense and cross versions a ranker version's features read (its manifest's ``dense``
    and ``cross.version``)."""
    data = manifest or {}
    cross = data.get("cross")
    found = [data.get("dense"), cross.get("version") if isinstance(cross, dict) else None]
    return [str(v) for v in found if isinstance(v, str) and v]


def versions_learned_groups(ws: Workspace, idents: Iterable[str | None]
                            ) -> dict[str, set[str]]:
    """Version id -> the query groups it learned labels of, for the registered versions among
    ``idents`` that learned any (versions gone: none)."""
    models = Models(ws)
    found = {v: learned_groups(models.get(v).manifest) for v in dict.fromkeys(idents)
             if v and models.is_version(v)}
    return {ident: groups for ident, groups in found.items() if groups}
