"""Simulated curators replaying gold labels, every ``kbcurate simulate`` mode and its report.

- Screening replays (``kbcurate simulate screening``): static, in-query learned and random
  orders and every stop rule side by side (``screening``, ``screening_run``, ``stop_replay``,
  over the lists of ``lists``; BC6PM's triage set in ``bc6pm``, the Hallmarks of Cancer lists in
  ``hoc``), their metrics (documents to find all, WSS@95,
  recall@k, ERF, ATD: ``metrics``), the report JSON and the recall-versus-screened plots
  (``plots``).
- Learn-as-you-label with the dense recipes (``kbcurate simulate``, the default learner):
  labelling and retraining rounds in a copy of the workspace (``dense``), their report
  (``dense_report``) and the admin job ``simulate`` (``jobs``; its kind in ``job_kinds``,
  the entry point ``simulation`` of ``kbcurate.job_kinds``).
- Learn-as-you-label with the learned ranker (``kbcurate simulate --learner ranker``:
  ``ranker``), in memory.

May import: curation.screening, curation.evaluation, curation.training, curation.ranking,
curation.search, curation.matching, curation.jobs, curation.access, curation.store,
curation.templates, kb_sources, retrievers.
"""
