"""Background jobs: the job table, submission, cancellation, stale-worker detection and the
worker process (``python -m curation.jobs.worker WS JOB_ID``) that runs registered job kinds.

- ``kinds``: the registry of job kinds (function, roles, whitelisted parameters, validator,
  longest run); each wing of the product declares its own kinds in its ``job_kinds`` module
  (read from the package itself), plug-ins through the ``kbcurate.job_kinds`` entry points;
- ``queue``: submit, read, cancel and run jobs; jobs whose worker is gone are failed; a request
  for work an unfinished job already does gets that job and a note saying who runs it;
- ``lifecycle``: what every queue's worker does with a job (claim, run, finish) and the job
  queue interface;
- ``watchdog``: the thread beside a running job: heartbeats, and its time limit (a job running
  too long is failed and its own worker process stopped);
- ``records``: when a job's record (a row of the ``jobs`` table, the same on every queue) counts
  as abandoned;
- ``queues``: the choice of job queue from the workspace's store setting, and the first queue
  (one worker process per job on this machine);
- ``distributed``: the queue on PostgreSQL through procrastinate (workers on any machine);
- ``guards``: waiting out a busy workspace, parameter and workspace-path checks, pid liveness;
- ``worker``: the worker process.

Job kinds are named as ``module:function`` strings, so this wing imports no job's code.

May import: curation.access, curation.store, curation.templates, kb_sources.
"""
