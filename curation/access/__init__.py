"""Who is signed in and what they may do: the users file, sign-in modes (users file, OIDC,
local), the lockout after failed sign-ins, remembered browser sign-ins (web_sessions), roles and
the server-side permission checks every write goes through; who settles disagreements and what an
annotator may see in blind review (adjudication).

May import: curation.store, curation.templates, kb_sources.
"""
