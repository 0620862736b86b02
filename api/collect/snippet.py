"""The line a site owner adds to a page to send its page views here (README, ``make demo``)."""

from __future__ import annotations

import json

TRACKER_FILE = "plausible.js"
"""The browser build of ``@plausible-analytics/tracker`` on npm, served by the site itself."""


def snippet(api_base: str, site: str, tracker_url: str = f"/js/{TRACKER_FILE}") -> str:
    """A ``<script type="module">`` that loads the official tracker from the site's own copy and
    points it at this API's ``/api/event``."""
    config = json.dumps({"domain": site, "endpoint": f"{api_base.rstrip('/')}/api/event"})
    return f'<script type="module">import {{ init }} from "{tracker_url}"; init({config});</script>'
