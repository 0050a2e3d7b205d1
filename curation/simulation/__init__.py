"""Simulated curators replaying gold labels: screening replays (static, in-query learned and
random orders, the stopping rule), their metrics (documents to find all, WSS@95, recall@k,
ERF, ATD), the report JSON and the recall-versus-screened plots.

The older learn-as-you-label simulations of the dense recipes and the ranker live in
``curation.training`` (``simulate``, ``simulate_ranker``).

May import: curation.screening, curation.evaluation, curation.training, curation.ranking,
curation.store, curation.templates, kb_sources, retrievers.
"""
