"""Whether a generation answers a view exactly, and how a view's keys are scoped.

A view is served only where both layers computed it with the same code: the policy that lets a
view be declared while the platform runs without a single inexact answer.
"""

from __future__ import annotations

from serving_layer.model import GenerationInfo
from views import get_view
from views.registry import view_mark


def per_site(gen: GenerationInfo, view: str) -> bool:
    """Whether a view's keys are ``site|value`` (from the generation's description of it, else
    from this process' declarations)."""
    info = gen.views.get(view)
    if info is not None:
        return bool(info.get("per_site"))
    try:
        return get_view(view).per_site
    except KeyError:
        return False


def readiness(view: str, gen: GenerationInfo, realtime_views: frozenset[str] | None) -> str | None:
    """Why ``view`` cannot be answered exactly from ``gen`` (None: it can).

    Exact needs both parts: batch views of the generation computed by the current code, and a
    realtime part that counted the view with the same code from the generation's cut on. A view
    declared while the platform runs is therefore served from the first generation opened after
    both the batch layer and the speed layer know it.
    """
    if any(gen.cut.values()) and view not in gen.day_map:
        return f"the served generation {gen.gen} has no batch views of it; the next batch run computes them"
    if realtime_views is not None:
        fp = gen.fingerprints.get(view)
        counted = any(m.partition("@")[0] == view for m in realtime_views)
        if not counted or (fp is not None and view_mark(view, fp) not in realtime_views):
            return (
                f"the speed layer has not counted it since generation {gen.gen}'s cut with the code of "
                "its batch views; it is served from the first generation opened after the speed layer "
                "runs with it"
            )
    return None
