"""Integrations with web frameworks and ORMs: ``starlette`` (also FastAPI), ``sqlalchemy``
(the outbox through a session), ``django`` (an app with management commands) and
``flask`` (an extension). Each imports its framework only when used."""
