"""The settlement explorer: a local web page over the figures `veritrain inspect` shows.

It reads the chain only (views, events and calldata through `protocol.chain`), keeps no
database and talks to no peer: `views.py` names what each JSON endpoint returns, `api.py`
routes a path to a view with a per-block cache and typed failures, `server.py` serves the
API and the page in `static/` from the standard library's HTTP server.
"""
