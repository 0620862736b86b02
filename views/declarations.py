"""The declared views, by name: what :func:`declare` adds (the shipped ones in views.dimensions,
and any module's own). views.registry looks them up, with the shipped ones loaded first."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from views.dimension import View

DECLARED: dict[str, View] = {}


def declare(view: View) -> View:
    """Make ``view`` part of the platform (a later declaration of the same name replaces it)."""
    if not view.name.replace("_", "").isalnum() or not view.name.islower():
        raise ValueError(f"view name {view.name!r}: use lower-case letters, digits and _")
    DECLARED[view.name] = view
    return view
