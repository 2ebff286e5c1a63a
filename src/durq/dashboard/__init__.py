"""The web dashboard (``durq dashboard``; extra ``durq[dashboard]``): server-rendered pages
over the same views as the CLI (:mod:`durq.observability.views`), actions as POSTs behind a
token and a CSRF check, ``/metrics``, ``/healthz`` and ``/api/status``.

:func:`durq.dashboard.app.create_app` builds the Starlette application.
"""
