"""Background jobs: the job table, submission, cancellation, stale-worker detection and the
worker process (``python -m curation.jobs.worker WS JOB_ID``) that runs registered job kinds.
Job kinds are named as ``module:function`` strings, so this wing imports no job's code.

May import: curation.access, curation.store, curation.templates, kb_sources.
"""
