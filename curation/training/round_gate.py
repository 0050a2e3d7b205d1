"""What a dense round's gate measures when labels of held-out relations train (issue 44 item 3).

Every usable label trains a dense version, those of dev and test relations included
(:mod:`curation.training.label_plan`). The KB's dev and test relations still never train, and
the gate measures **only the test queries whose query group no compared version learned a
label of** (the candidate's labels, and the active version's as its manifest records them in
``examples.labels.learned_groups``); the dev pool that picks the epoch leaves the candidate's
learned groups out the same way. So every query the gate scores is judged by the KB's citations
alone, on a query no compared version saw a label of: the labels cannot raise the figures the
gate compares, and the queries left out are named in the version's metrics
(``test_left_out``) and its warnings.

Why not the ranker's cross-fitting (:mod:`curation.training.heldout`: k models, each without
one fold's labels): a LightGBM fit takes seconds, a dense fit minutes to hours on a CPU, and k
of them per round is out of reach. Why not use the labels of the measured queries as judgments
instead of the KB's: a label agrees with the KB's citation more often than not, so training on
it and measuring on the KB's gold of the same query would score what was learned, not search.
The price is fewer measured queries: one query group per labelled relation (the first query
entity, as the split), which the warnings count; where fewer than 20 test queries remain, the
gate wants an admin's written reason, as always.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from curation.evaluation.harness import EvalTask

logger = logging.getLogger(__name__)

Report = Callable[[float, str], None]


@dataclass(frozen=True)
class MeasuredQueries:
    """The task a gate measures on, and what it left out.

    Attributes:
        task: The task without the dev and test queries of the learned groups.
        left_out: Split -> query ids left out.
        groups: Split -> the learned query groups those queries belong to.
    """

    task: EvalTask
    left_out: dict[str, tuple[str, ...]]
    groups: dict[str, tuple[str, ...]]

    def count(self, split: str) -> int:
        """How many ``split`` queries were left out."""
        return len(self.left_out.get(split, ()))

    def warning(self) -> str | None:
        """The sentence for the round's warnings (None when nothing was left out)."""
        n = self.count("test")
        if not n:
            return None
        kept = len(self.task.split("test"))
        groups = len(self.groups.get("test", ()))
        return (f"{n} of {n + kept} test queries left out of the gate's measurement: curators' "
                f"labels of their {groups} query group(s) were trained on")

    def to_json(self) -> dict[str, Any]:
        """``test_left_out`` as kept in the version's metrics."""
        return {"queries": list(self.left_out.get("test", ())),
                "groups": list(self.groups.get("test", ())),
                "dev_queries": list(self.left_out.get("dev", ())),
                "why": "a compared version learned labels of these query groups"}


def measured_queries(task: EvalTask, groups: Iterable[str]) -> MeasuredQueries:
    """``task`` without the dev and test queries of ``groups`` (train queries stay)."""
    learned = set(groups)
    keep, left_out, hit = [], {}, {}
    for q in task.queries:
        if q.split != "train" and q.group in learned:
            left_out.setdefault(q.split, []).append(q.qid)
            hit.setdefault(q.split, set()).add(q.group)
        else:
            keep.append(q)
    if left_out:
        logger.info("%s: %s left out of the measurement (learned query groups %s)",
                    task.schema, {s: len(v) for s, v in left_out.items()},
                    {s: sorted(v) for s, v in hit.items()})
    return MeasuredQueries(replace(task, queries=tuple(keep)),
                           {s: tuple(v) for s, v in left_out.items()},
                           {s: tuple(sorted(v)) for s, v in hit.items()})


def scaled(report: Report | None, start: float, end: float, prefix: str = ""
           ) -> Report | None:
    """``report`` mapped from 0..1 onto ``start..end``, each message after ``prefix``."""
    if report is None:
        return None
    return lambda f, m: report(start + (end - start) * min(max(f, 0.0), 1.0), prefix + m)


#: The stages of a version's index build, in order (:mod:`curation.training.activation`).
INDEX_STAGES = ("dense", "hybrid")


def stage_reporter(report: Report | None, start: float, end: float
                   ) -> Callable[[str, int, int], None] | None:
    """An index build's ``fn(stage, done, total)`` mapped onto ``start..end`` of ``report``,
    one equal share per stage of :data:`INDEX_STAGES`, in order."""
    if report is None:
        return None
    share = (end - start) / len(INDEX_STAGES)

    def step(stage: str, done: int, total: int) -> None:
        i = INDEX_STAGES.index(stage) if stage in INDEX_STAGES else len(INDEX_STAGES) - 1
        report(start + share * (i + done / max(total, 1)),
               f"building the {stage} index before the switch: {done:,}/{total:,}")

    return step


def gate_decision(schema: str, scores: dict[str, dict[str, float]], gate: Any, n_test: int,
                  left_out: int) -> Any:
    """The gate's decision on a round's ``scores`` (role -> metrics; None without a gate)."""
    from curation.training.gate import GateDecision, decide

    if gate is None:
        return None
    if "candidate" in scores:
        return decide(scores["candidate"], scores.get("active"), tolerance_pp=gate.tolerance_pp,
                      test_queries=n_test, small_test_reason=gate.small_test_reason)
    why = (f"all {left_out} test queries of {schema} belong to query groups whose labels were "
           "trained on, so the gate has no query left to compare on" if left_out else
           f"{schema} has no held-out (test split) query with a cited abstract in the "
           "workspace, so the gate cannot compare")
    return GateDecision(False, (why + "; kept as a candidate",), {}, {})
