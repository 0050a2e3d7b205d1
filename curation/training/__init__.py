"""KB-aware training data and rounds: EDEL example builders (margin classes from entity
matching and KB relations), citation / MeSH data for BiCA and BioHiCL, the retraining loop and
its simulation. Text-only engines (losses, trainer, graph walks) live in retrievers.training.

May import: curation.evaluation, curation.search, curation.store, curation.matching, curation.jobs,
curation.ranking,
curation.access, curation.templates, kb_sources, retrievers.
"""
