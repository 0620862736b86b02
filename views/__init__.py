"""Views: declared dimensions (a key per event) computed by both layers in one shared pass."""

from views.dimension import NONE, SCOPE_SEPARATOR, Dimension, View, site_column
from views.registry import all_views, declare, declared, fingerprint, get_view, view_mark
from views.scopes import describe, scope_of, stored_key, value_of
from views.shared_pass import compute, input_columns, view_rows

__all__ = [
    "NONE",
    "SCOPE_SEPARATOR",
    "Dimension",
    "View",
    "all_views",
    "compute",
    "declare",
    "declared",
    "describe",
    "fingerprint",
    "get_view",
    "input_columns",
    "scope_of",
    "site_column",
    "stored_key",
    "value_of",
    "view_mark",
    "view_rows",
]
