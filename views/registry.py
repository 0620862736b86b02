"""The registry of views: the one place both layers and the API look up what exists.

Views are declared (views.declarations.declare) when their module is imported; :func:`all_views`
imports the shipped declarations (:mod:`views.dimensions`) first.

Fingerprints decide when stored batch views are stale. A view's fingerprint covers everything its
stored values depend on: its declaration (Spark's rendering of the key expression, so an edit of
any helper the expression calls shows), the shared pass that computes every dimension, the row
format and the stored layout (the caller's, of the batch views' backend). The batch layer stores
each generation's fingerprints and recomputes in full every view whose fingerprint changed since
the served generation; the speed layer records the fingerprints it counts with, so the API serves
a view only where both layers agree.
"""

from __future__ import annotations

import hashlib
import inspect
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from views.declarations import DECLARED as _REGISTRY
from views.declarations import declare as declare
from views.dimension import View


def all_views() -> list[View]:
    _load_definitions()
    found = (_counted(_REGISTRY[name]) for name in sorted(_REGISTRY))
    return [v for v in found if v is not None]


def get_view(name: str) -> View:
    _load_definitions()
    view = _counted(_REGISTRY[name]) if name in _REGISTRY else None
    if view is None:
        known = ", ".join(v.name for v in all_views())
        raise KeyError(f"no view named {name!r}; registered: {known}")
    return view


def _counted(view: View) -> View | None:
    """``view`` as this deployment counts it: with ``count_visits`` off (a setting), dimensions
    count no visits and the views of visits only are left out."""
    from config.settings import get_settings

    if get_settings().count_visits:
        return view
    if view.per_visit is not None:
        return None
    return replace(view, visits=False) if view.visits else view


@contextmanager
def declared(view: View) -> Iterator[View]:
    """Declare (or replace) a view for the duration of a block: tests of new views and bug fixes."""
    _load_definitions()
    original = _REGISTRY.get(view.name)
    declare(view)
    try:
        yield view
    finally:
        if original is None:
            _REGISTRY.pop(view.name, None)
        else:
            _REGISTRY[view.name] = original


def _source(obj: types.ModuleType | Callable[..., object]) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return repr(obj)


def _scan_sources() -> list[str]:
    """The text of the batch layer's visit expressions (toolchain/visit-scan: views.visit_scan)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "toolchain" / "visit-scan" / "src"
    return [p.read_text() for p in sorted(root.rglob("*.scala"))]


def pass_fingerprint(layout: str) -> str:
    """Hash of the code every view's stored values depend on: the shared pass as it is now (the
    live stage functions, so a patched stage shows too), the definition of a visit and its gap,
    the batch layer's visits in the scan (views.visit_scan and its expressions),
    the device rules, the row format, the stored document's ``layout`` (what the batch views'
    backend gives: stores.mongo.codec.stored_layout; a layout a reader no longer decodes must not
    be served), and the dedup rule with its window (a changed rule or window recomputes every
    view). The layout comes from the caller (the jobs, which choose the backend): views know no
    store."""
    from config.settings import get_settings
    from contract import duplicates
    from views import columns, devices, rows, sessions, shared_pass, visit_scan

    parts = [_source(shared_pass), _source(columns), _source(rows), _source(sessions), repr(devices.RULES)]
    parts += [_source(visit_scan), *_scan_sources()]
    parts.append(f"session gap {get_settings().session_gap_s} s")
    parts += [_source(duplicates), f"dedup window {get_settings().speed_dedup_window_s} s"]
    parts += [_source(getattr(shared_pass, stage)) for stage in shared_pass.STAGES]
    parts.append(layout)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def fingerprint(view: View, layout: str) -> str:
    """The view's fingerprint, its values stored in ``layout`` (:func:`pass_fingerprint`; needs
    an active Spark session for a dimension's expression)."""
    declaration = (
        f"dimension {view.name} per_site={view.per_site} visits={view.visits} "
        f"per_visit={view.per_visit} key={view.expression()}"
    )
    digest = hashlib.sha256(f"{declaration}\0{pass_fingerprint(layout)}".encode()).hexdigest()[:16]
    return digest


def view_mark(name: str, fingerprint: str) -> str:
    """A view as the speed layer records it for a generation it counted: ``name@fingerprint``
    (serving_layer.readiness compares it with the generation's batch fingerprints)."""
    return f"{name}@{fingerprint}"


def _load_definitions() -> None:
    # Importing the definition module declares the shipped views.
    import views.dimensions  # noqa: F401
