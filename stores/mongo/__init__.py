"""Batch views on MongoDB (FerretDB locally): ``codec`` (the stored document, its rankings and
collection names), ``writer`` (the batch layer's writes and garbage collection), ``reader`` (the
serving layer's reads), ``cache`` (the reader's byte-bounded cache) and ``ferretdb`` (the local
FerretDB's ``_id`` index workaround)."""
