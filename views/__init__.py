"""View definitions: one PySpark function per view, shared by the batch and the speed layer."""

from views.registry import View, all_views, get_view, register, replaced
from views.visits import visits

__all__ = ["View", "all_views", "get_view", "register", "replaced", "visits"]
