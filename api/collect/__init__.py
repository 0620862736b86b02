"""Collection from web pages: ``POST /api/event``, the endpoint the official Plausible tracker
(``@plausible-analytics/tracker``) posts to.

The browser sends only what a page knows (event name, URL, site, referrer); the server derives
the rest without cookies and without keeping the address: the client address (:mod:`.address`),
its country (:mod:`.country`), a visitor id hashed with a daily salt (:mod:`.visitors`), and
builds a contract event that it validates and produces like ``POST /v1/events`` does
(:mod:`.collector`, :mod:`.producer`).
"""

COLLECT_PATH = "/api/event"
