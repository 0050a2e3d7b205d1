"""Who is signed in and what they may do: the users file, sign-in modes (users file, OIDC,
local), the lockout after failed sign-ins, roles and the server-side permission checks every
write goes through.

May import: curation.store, curation.templates, kb_sources.
"""
