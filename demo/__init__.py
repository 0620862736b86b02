"""`make demo`: the whole platform up, answering example queries."""
