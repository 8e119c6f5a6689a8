"""Web pages of leaderboards and runs: served by ``medflows serve``
(:func:`tasks_lib.web.routes.web_router`, mounted on the MedBench service app) and written as a
static site (:func:`tasks_lib.web.site.write_site`, ``medflows report --html DIR``). Server-side
Jinja2 templates and plain CSS, no JavaScript; pages are rendered from the ledger, run records,
score cards and traces only, never from a pool's private files (docs/web.md).

Nothing is imported here: the static site needs no FastAPI, the service no site writer.
"""
