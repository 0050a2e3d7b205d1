"""How each recipe turns curators' labels into its own rows (retrain --recipe X)."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from curation.training.feedback import LabelExamples
from curation.training.recipes.bica import with_labels as bica_with_labels
from curation.training.recipes.bica.triplets import BicaExampleSet, Triplet
from curation.training.recipes.biohicl import with_labels as hicl_with_labels
from curation.training.recipes.biohicl.mesh_labels import (
    MeshLabels,
    label_similarity,
    positive_partners,
)
from curation.training.recipes.edel.examples import Example


def _labels(*rows: tuple[int, str, str, str]) -> LabelExamples:
    """(label id, query id, doc id, grade) -> the LabelExamples feedback would make."""
    examples = tuple(Example(q, f"query {q}", d, g != "irrelevant",
                             {"complete": 0.0, "partial": 0.5, "irrelevant": 0.8}[g],
                             f"label:{g}") for _, q, d, g in rows)
    return LabelExamples(examples, {d: f"text {d}" for _, _, d, _ in rows},
                         tuple(i for i, *_ in rows), (7,), (), (), (),
                         max(i for i, *_ in rows))


def test_bica_labels_are_positives_and_hard_negatives():
    kb = BicaExampleSet("S", (Triplet("q1", "query q1", "p1", "n1", "walk"),
                              Triplet("q2", "query q2", "p2", "n2", "walk")),
                        {d: f"text {d}" for d in ("p1", "n1", "p2", "n2")},
                        {"sha256": "kb", "examples": 2})
    made = _labels((10, "q1", "L1", "complete"), (11, "q1", "X1", "irrelevant"),
                   (12, "q2", "X2", "irrelevant"), (13, "q3", "L3", "complete"),
                   (14, "q1", "P1", "partial"))
    data, used = bica_with_labels(kb, made)
    new = [(t.qid, t.positive_doc, t.negative_doc) for t in data.triplets[2:]]
    # a labelled positive meets the query's labelled negative; a labelled negative without a
    # labelled positive meets the KB's positive; q3 has nothing to pair with; partial is unused
    assert new == [("q1", "L1", "X1"), ("q2", "p2", "X2")]
    assert used == (10, 11, 12)
    assert data.manifest["labels"]["unused"] == [13, 14]
    assert data.manifest["labels"]["held_out"] == [7] and data.manifest["examples"] == 4
    assert data.texts["L1"] == "text L1" and data.manifest["sha256"] != "kb"


def test_biohicl_labels_become_a_positive_group():
    matrix = sparse.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]))
    mesh = MeshLabels(("a", "b", "c"), ("C01", "C02"), matrix, np.array([1, 1, 1]))
    assert label_similarity(mesh, "a", "b") == 0.0
    made = _labels((1, "q1", "a", "complete"), (2, "q1", "b", "partial"),
                   (3, "q1", "z", "complete"), (4, "q2", "c", "complete"),
                   (5, "q1", "c", "irrelevant"))
    labels, used, facts = hicl_with_labels(mesh, made)
    # a and b (no shared heading) and z (no heading at all) are now similar above beta 0.3;
    # q2's single document makes no pair; the irrelevant label carries nothing
    assert labels.doc_ids == ("a", "b", "c", "z") and labels.nodes[-1] == "label:q1"
    assert round(label_similarity(labels, "a", "b"), 6) == 0.5
    assert round(label_similarity(labels, "a", "z"), 6) == round(1 / np.sqrt(2), 6)
    assert label_similarity(labels, "a", "c") == 0.0
    assert used == (1, 2, 3) and facts["labels_unused"] == [4, 5]
    partners = positive_partners(labels, beta=0.3)
    assert partners[0].tolist() == [1, 3]
