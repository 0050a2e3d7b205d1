"""Entity matching: finds a relation's entities in a text (exact, synonym, variant / residue /
PTM normalisation, abbreviations, guarded fuzzy matching), highlights them as escaped HTML, and
measures itself against annotated corpora (EDEL's g(e, d) and the basis of EntityRecall).

May import: kb_sources.
"""
