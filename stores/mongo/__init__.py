"""Batch views and the durable records on MongoDB (FerretDB locally): ``client`` (the clients, from
the settings), ``codec`` (the stored document, its rankings and collection names), ``writer`` (the
batch layer's writes and garbage collection), ``reader`` (the serving layer's reads), ``cache`` (the
reader's byte-bounded cache), ``generations`` (the registry's documents and served pointer),
``manifest`` (the master dataset's segments), ``lease`` (the batch run's lease), ``api_keys`` and
``ferretdb`` (the local FerretDB's ``_id`` index workaround)."""
