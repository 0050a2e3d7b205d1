"""In-query learning and stopping (issue 38, items 1 and 2): the screening queue, the per-query
learner, the estimate of what is left and the two stopping rules, on hand-made lists."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom, hypergeom

from curation.screening.calibration import Calibration, fit_calibration
from curation.screening.learner import LearnerOptions, rescore, svm_earns_its_say
from curation.screening.queue import build_queue
from curation.screening.stopping import (
    allowed_misses,
    calibrated_advice,
    count_pmf,
    estimate_remaining,
    hypergeometric_p,
    sample_advice,
)
from curation.screening.view import ORDER_LEARNED, ORDER_STATIC, relevant_grade, screening_view
from kb_sources.errors import CurationError

#: Eight abstracts: d0 and d6 are about BRAF V600E in melanoma; d6 is worded so that the ranker
#: (static scores below) puts it last but one. The rest are about other things.
TEXTS = {
    "d0": "BRAF V600E kinase mutation drives melanoma growth and vemurafenib response",
    "d1": "Sleep quality and diet in a cohort of office workers",
    "d2": "Hip fracture surgery outcomes in elderly patients",
    "d3": "Statin use and cholesterol levels in a community sample",
    "d4": "Asthma inhaler adherence among school children",
    "d5": "Hearing loss after noise exposure in factory workers",
    "d6": "Vemurafenib resistance in BRAF V600E melanoma: kinase reactivation",
    "d7": "Vitamin D and bone density in postmenopausal women",
}
STATIC = {"d0": 3.0, "d1": 2.0, "d2": 1.5, "d3": 1.0, "d4": 0.5, "d5": 0.2, "d6": -1.0,
          "d7": -2.0}


PRIOR = Calibration(-2.0, 1.0)


def queue(calibration: Calibration = PRIOR):
    ids = list(TEXTS)
    return build_queue("melanoma", ids, [TEXTS[d] for d in ids], [STATIC[d] for d in ids],
                       calibration=calibration)


# -- queue ---------------------------------------------------------------------------------------
def test_queue_sorts_by_the_ranker_and_caches_unit_tfidf_rows():
    q = queue()
    assert q.doc_ids == ("d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7")
    assert q.prior.tolist() == pytest.approx([1.0, 0.0, -0.5, -1.0, -1.5, -1.8, -3.0, -4.0])
    norms = np.sqrt(np.asarray(q.rows.multiply(q.rows).sum(axis=1)).ravel())
    assert norms[norms > 0] == pytest.approx(np.ones(int((norms > 0).sum())))
    assert "braf" in q.terms and "v600e" in q.terms  # terms of >= 2 candidates only
    assert "fracture" not in q.terms


def test_tfidf_rows_are_scikit_learns_features_in_float32():
    from sklearn.feature_extraction.text import TfidfVectorizer

    from curation.screening.tfidf import tfidf_rows

    texts = [*TEXTS.values(), "BRAF braf: the V600E melanoma kinase", "", "of the and",
             "Vemurafenib-resistant BRAF V600E melanoma cells and MEK inhibitors"] * 3
    texts[5] = "Ünïcode café kinase: BRAF V600E"  # accents and case as scikit-learn reads them
    reference = TfidfVectorizer(sublinear_tf=True, ngram_range=(1, 2), min_df=2, max_df=0.95,
                                stop_words="english")
    want = reference.fit_transform(texts).toarray()
    rows, terms = tfidf_rows(texts)
    assert terms == tuple(reference.get_feature_names_out())
    assert "braf v600e" in terms and "melanoma kinase" in terms  # bigrams skip stop words
    assert rows.dtype == np.float32 and rows.has_sorted_indices
    assert rows.toarray() == pytest.approx(want, abs=1e-6)


def test_tfidf_keeps_the_terms_in_the_most_texts_when_capped():
    from curation.screening.tfidf import tfidf_rows

    rng = np.random.default_rng(5)
    common = [f"topic{i}" for i in range(30)]
    texts = [" ".join([*rng.choice(common, 6), f"rare{i} rare{i + 1}", "ward"]) for i in range(400)]
    full_rows, full_terms = tfidf_rows(texts)
    rows, terms = tfidf_rows(texts, max_terms=40)
    assert len(full_terms) > 400 and len(terms) == 40 and rows.shape == (400, 40)
    df = np.asarray((full_rows > 0).sum(axis=0)).ravel()
    kept = np.isin(np.asarray(full_terms), terms)
    assert df[kept].min() >= df[~kept].max()  # no dropped term is in more texts than a kept one
    assert "ward" not in terms  # in every text: above max_df
    norms = np.sqrt(np.asarray(rows.multiply(rows).sum(axis=1)).ravel())
    assert norms[norms > 0] == pytest.approx(np.ones(int((norms > 0).sum())), abs=1e-6)


def test_a_large_queue_keeps_float32_rows_and_a_capped_vocabulary():
    from curation.screening.tfidf import MAX_TERMS

    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(3000)]
    n = 2000
    texts = [" ".join(rng.choice(words, 40)) for _ in range(n)]
    ids = [f"c{i}" for i in range(n)]
    assert 500 < len(build_queue("big", ids, texts, np.zeros(n)).terms) < MAX_TERMS
    # 500 terms are to these 2,000 texts what 2**17 are to 40,000 abstracts
    q = build_queue("big", ids, texts, rng.normal(size=n), max_terms=500)
    assert q.rows.dtype == np.float32 and q.rows.shape == (n, 500) and len(q.terms) == 500
    assert q.index()["c0"] == q.doc_ids.index("c0") and q.ids_at(np.array([2, 0])) == \
        [q.doc_ids[2], q.doc_ids[0]]
    rows = q.rows
    assert q.nbytes > rows.data.nbytes + rows.indices.nbytes + q.prior.nbytes


def test_one_product_rescore_keeps_the_two_centroid_order():
    """Both centroid terms folded into one float32 product: the order of the float64
    formula of the module docstring."""
    rng = np.random.default_rng(11)
    vocab = [f"t{i}" for i in range(60)]
    texts = [" ".join(rng.choice(vocab, 12)) for _ in range(300)]
    q = build_queue("q", [f"d{i}" for i in range(300)], texts, rng.normal(size=300))
    labels = {int(i): bool(rng.random() < 0.3) for i in rng.choice(300, 25, replace=False)}
    options = LearnerOptions(handover=math.inf)  # the centroid terms alone
    x = q.rows.astype(np.float64).toarray()
    z = q.prior.copy()
    for kind, weight in ((True, options.similarity), (False, -options.dissimilarity)):
        rows = [i for i, v in labels.items() if v is kind]
        centroid = x[rows].sum(axis=0)
        z += weight * len(rows) / (len(rows) + options.evidence) * x @ (
            centroid / np.linalg.norm(centroid))
    r = rescore(q, labels, options)
    assert r.log_odds == pytest.approx(z, abs=1e-4)
    rest = [i for i in np.argsort(-z, kind="stable") if i not in labels]
    assert r.order == tuple(int(i) for i in rest)


def test_queue_rejects_bad_input_with_clear_errors():
    with pytest.raises(CurationError, match="2 candidates but 1 texts"):
        build_queue("q", ["a", "b"], ["x"], [1.0, 2.0])
    with pytest.raises(CurationError, match="repeats"):
        build_queue("q", ["a", "a"], ["x", "y"], [1.0, 2.0])
    with pytest.raises(CurationError, match="not finite"):
        build_queue("q", ["a", "b"], ["x", "y"], [1.0, float("nan")])


# -- learner -------------------------------------------------------------------------------------
def test_no_label_keeps_the_static_order():
    r = rescore(queue(), {})
    assert r.order == tuple(range(8)) and not r.learned
    assert r.log_odds.tolist() == pytest.approx(queue().prior.tolist())


def test_a_relevant_label_moves_the_candidate_with_its_terms_up():
    q = queue()
    labels = {0: True, 1: False, 2: False}  # d0 relevant, d1 and d2 not
    r = rescore(q, labels)
    assert r.learned and (r.positives, r.negatives) == (1, 2)
    assert q.doc_ids[r.order[0]] == "d6"  # was 7th of 8, now screened next
    assert set(r.order) == set(range(8)) - set(labels)
    static_only = rescore(q, labels, LearnerOptions(similarity=0.0))
    assert q.doc_ids[static_only.order[0]] == "d3"


def test_few_labels_are_not_yet_evidence():
    q = queue()
    weak = rescore(q, {0: True}, LearnerOptions(similarity=4.0, dissimilarity=0.0, evidence=3.0))
    strong = rescore(q, {0: True}, LearnerOptions(similarity=4.0, dissimilarity=0.0, evidence=0.0))
    gain = lambda r: r.log_odds[6] - q.prior[6]  # noqa: E731
    assert gain(weak) == pytest.approx(gain(strong) / 4)  # 1 / (1 + 3) of the weight
    default = rescore(q, {0: True})  # evidence 2: one relevant label moves a third of the weight
    assert gain(default) == pytest.approx(gain(strong) * 32 / 4 / 3)


def test_irrelevant_labels_push_similar_candidates_down():
    q = queue()
    assert rescore(q, {1: False}, LearnerOptions(dissimilarity=0.0)).order == (0, *range(2, 8))
    r = rescore(q, {1: False})  # d1 (office workers) -> d5 (factory workers) goes down
    assert r.log_odds[5] < q.prior[5] - 0.5 and r.order.index(5) > r.order.index(6)
    assert r.log_odds[2] == pytest.approx(q.prior[2])  # nothing in common with d1


def test_the_logistic_part_learns_from_both_kinds_of_label():
    q = queue()
    labels = {0: True, 1: False, 2: False, 3: False}
    r = rescore(q, labels, LearnerOptions(similarity=0.0, l2=0.03, handover=math.inf))
    assert q.doc_ids[r.order[0]] == "d6"
    assert r.log_odds[6] > q.prior[6] + 1.0 and r.log_odds[7] < q.prior[7]


def _topic_queue(seed: int = 5, n: int = 300):
    """A list where a third is about one topic (its words) and the static order is noise."""
    rng = np.random.default_rng(seed)
    topic = ["kinase", "phosphorylation", "substrate", "residue", "serine", "catalytic"]
    other = [f"w{i}" for i in range(80)]
    relevant = rng.random(n) < 0.33
    texts = [" ".join([*rng.choice(other, 10), *(rng.choice(topic, 3) if r else [])])
             for r in relevant]
    q = build_queue("topic", [f"d{i}" for i in range(n)], texts, rng.normal(size=n))
    _TOPIC_TEXTS.update(zip([f"d{i}" for i in range(n)], texts, strict=True))
    return q, np.array([relevant[int(d[1:])] for d in q.doc_ids])  # in queue order


_TOPIC_TEXTS: dict[str, str] = {}


def _texts_of(q):
    return [_TOPIC_TEXTS[d] for d in q.doc_ids]


def test_the_svm_takes_over_as_relevant_labels_accumulate():
    """The order is (1 - w) * the centroid model + w * scale * a balanced linear SVM's margin,
    w = R / (R + handover): the formula of the module docstring, fitted independently here."""
    from sklearn.svm import LinearSVC

    q, relevant = _topic_queue()
    labelled = list(range(60))
    labels = {i: bool(relevant[i]) for i in labelled}
    r_count = sum(labels.values())
    options = LearnerOptions()
    base = rescore(q, labels, LearnerOptions(handover=math.inf))
    r = rescore(q, labels, options)
    w = options.max_share * r_count / (r_count + options.handover)
    assert r.handed_over == pytest.approx(w) and base.handed_over == 0.0
    y = relevant[labelled]
    weight = np.where(y, 1.0, y.sum() / (options.svm_ratio * (~y).sum()))
    weight *= len(y) / weight.sum()
    svm = LinearSVC(C=options.svm_c, random_state=0).fit(q.rows[labelled], y.astype(int),
                                                       sample_weight=weight)
    margin = svm.decision_function(q.rows)
    expected = (1 - w) * base.log_odds + w * options.margin_scale * margin
    assert r.log_odds == pytest.approx(expected, abs=1e-4)
    # the topic's words were learned: the next 40 screened are mostly relevant
    rest = [i for i in range(len(q)) if i not in labels]
    share = lambda order: float(np.mean(relevant[list(order[:40])]))  # noqa: E731
    assert share(r.order) >= 0.9 > np.mean(relevant[rest]) + 0.4
    assert rescore(q, labels, options).order == r.order  # deterministic


def test_the_svm_has_no_say_until_it_beats_the_ranking_on_the_labels():
    q, relevant = _topic_queue()
    pos, neg = np.flatnonzero(relevant).tolist(), np.flatnonzero(~relevant).tolist()
    only_relevant = {i: True for i in pos[:5]}
    r = rescore(q, only_relevant)
    assert r.handed_over == 0.0
    assert r.log_odds == pytest.approx(
        rescore(q, only_relevant, LearnerOptions(handover=math.inf)).log_odds)
    two_each = {**{i: True for i in pos[:2]}, **{i: False for i in neg[:2]}}
    assert rescore(q, two_each).handed_over == 0.0  # 3 of each kind needed
    three_each = {**{i: True for i in pos[:3]}, **{i: False for i in neg[:3]}}
    assert svm_earns_its_say(q, three_each, LearnerOptions())  # the static order is noise
    assert rescore(q, three_each).handed_over == pytest.approx(0.8 * 3 / 8)  # 0.8 * 3 / (3 + 5)
    # a ranking that already puts the relevant ones first keeps the order to itself
    ranked = build_queue("topic", q.doc_ids, _texts_of(q), relevant * 5.0)
    rel = np.array([relevant[q.index()[d]] for d in ranked.doc_ids])
    labels = {**{i: True for i in np.flatnonzero(rel)[:6].tolist()},
              **{i: False for i in np.flatnonzero(~rel)[:6].tolist()}}
    assert not svm_earns_its_say(ranked, labels, LearnerOptions())
    assert rescore(ranked, labels).handed_over == 0.0


def test_learner_options_and_labels_are_checked():
    with pytest.raises(CurationError, match="similarity must be a number >= 0"):
        LearnerOptions(similarity=-1)
    with pytest.raises(CurationError, match="l2 must be a positive number"):
        LearnerOptions(l2=0)
    with pytest.raises(CurationError, match="handover must be a positive number"):
        LearnerOptions(handover=0)
    with pytest.raises(CurationError, match="margin_scale must be a number >= 0"):
        LearnerOptions(margin_scale=-1.0)
    with pytest.raises(CurationError, match=r"max_share must be in \[0, 1\]"):
        LearnerOptions(max_share=1.5)
    with pytest.raises(CurationError, match="outside the screening queue"):
        rescore(queue(), {8: True})


# -- calibration ---------------------------------------------------------------------------------
def test_calibration_recovers_a_known_link_of_score_and_rank():
    rng = np.random.default_rng(3)
    scores = [rng.normal(rng.normal(), 1.0, size=200) for _ in range(60)]
    truth = Calibration(-1.0, 1.0, -0.5)
    relevant = [rng.random(200) < 1 / (1 + np.exp(-truth.log_odds(s))) for s in scores]
    fitted = fit_calibration(scores, relevant)
    assert fitted.intercept == pytest.approx(-1.0, abs=0.3)
    assert fitted.slope == pytest.approx(1.0, abs=0.15)
    assert fitted.rank_slope == pytest.approx(-0.5, abs=0.12) and fitted.queries == 60
    # ranks are places in the descending order, whatever order the scores come in
    assert truth.log_odds(np.array([0.0, 2.0])).tolist() == pytest.approx(
        [-1.0 - 0.5 * np.log(2), 1.0])
    with pytest.raises(CurationError, match="relevant and irrelevant"):
        fit_calibration([np.zeros(3)], [np.zeros(3, dtype=bool)])
    with pytest.raises(CurationError, match="rank slope <= 0"):
        Calibration(0.0, 1.0, 0.5)


# -- what is left, and when to stop --------------------------------------------------------------
def test_count_distribution_is_exact_for_equal_probabilities():
    pmf = count_pmf(np.full(30, 0.1))
    assert pmf[:8] == pytest.approx(binom.pmf(np.arange(8), 30, 0.1), abs=1e-12)
    small = count_pmf(np.full(500, 0.002))  # the Poisson term: Le Cam's bound 500 * 0.002^2
    assert small[:4] == pytest.approx(binom.pmf(np.arange(4), 500, 0.002), abs=0.002)


def test_allowed_misses_follow_the_recall_target():
    assert [allowed_misses(f, 0.95) for f in (0, 1, 18, 19, 38)] == [0, 0, 0, 1, 2]
    assert allowed_misses(4, 0.8) == 1  # 4 / 5 = 80%
    with pytest.raises(CurationError, match="recall target"):
        allowed_misses(3, 0.0)


def test_the_calibrated_estimate_and_its_advice():
    prior = np.array([2.0, 2.0] + [-9.0] * 200)
    rem = estimate_remaining(prior, {0: True, 1: True})
    assert rem.found == 2 and rem.unscreened == 200 and rem.allowed == 0
    assert rem.expected < 0.05 and rem.low == 0 and rem.p_target > 0.95
    assert calibrated_advice(rem).stop and "You can stop" in calibrated_advice(rem).message
    busy = estimate_remaining(np.array([2.0, 2.0] + [-1.0] * 200), {0: True, 1: True})
    assert busy.expected > 20 and busy.high >= busy.low and not calibrated_advice(busy).stop
    none = estimate_remaining(prior, {5: False})
    assert none.p_target == 0.0 and not calibrated_advice(none).stop


def test_the_hypergeometric_rule_never_stops_before_its_sample():
    assert hypergeometric_p(900, 5, 0, 0) == 1.0
    assert not sample_advice(1.0, 0).stop
    # 100 left at the switch, 10 found: "recall < 95%" needs >= 1 relevant among the 100
    assert hypergeometric_p(100, 10, 50, 0) == pytest.approx(0.5)
    assert hypergeometric_p(100, 10, 96, 0) == pytest.approx(hypergeom.cdf(0, 100, 1, 96))
    assert sample_advice(hypergeometric_p(100, 10, 96, 0), 96).stop
    # a relevant one in the sample raises the bar: recall < 95% now needs >= 2 among the 100
    assert hypergeometric_p(100, 10, 96, 1) == pytest.approx(hypergeom.cdf(1, 100, 2, 96))
    with pytest.raises(CurationError, match="Bad sample counts"):
        hypergeometric_p(10, 0, 11, 0)
    assert math.isclose(hypergeometric_p(1, 30, 1, 0), 0.0)  # K = 2 exceeds the 1 left


# -- the page's call -----------------------------------------------------------------------------
def test_screening_view_counts_labels_by_document_and_says_how_the_order_was_made():
    q = queue()
    first = screening_view(q, [])
    assert first.order == q.doc_ids and first.order_mode == ORDER_STATIC
    assert first.order_labels == 0 and first.found_curve == ()
    view = screening_view(q, [("d0", "complete"), ("d3", "complete"), ("d1", "irrelevant"),
                              ("d2", "skip"), ("elsewhere", "complete"), ("d3", "irrelevant")])
    assert view.order_mode == ORDER_LEARNED and view.order_labels == 3  # d3's last label counts
    assert view.handed_over == 0.0 == first.handed_over  # 3 labels of each kind before any
    assert view.found_curve == (1, 1, 1) and view.remaining.found == 1
    assert view.order[0] == "d6" and "d2" in view.order  # skipped: still to screen
    assert set(view.probabilities) == set(view.order)
    assert [relevant_grade(g) for g in ("complete", "partial", "irrelevant", "skip")] == \
        [True, True, False, None]


def test_the_found_chart_shows_the_curve_and_the_estimated_total():
    from curation.screening.chart import found_chart

    view = screening_view(queue(), [("d0", "complete"), ("d1", "irrelevant")])
    fig = found_chart(view)
    assert list(fig.data[0].y) == [0, 1, 1] and list(fig.data[0].x) == [0, 1, 2]
    total = view.remaining.found + view.remaining.expected
    assert fig.layout.shapes[0].y0 == pytest.approx(total)
    assert "Keep screening" in view.advice.message and not view.advice.stop
