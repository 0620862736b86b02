"""Realtime views and the generation hot copy on Redis: ``client`` (the jobs' client), ``keys``
(the key layout and encodings), ``handshake`` (the registry's hot copy, the speed commit record and
the two transactions of the handshake), ``sink`` (the speed layer's writes, inside its commit
transaction), ``reader`` (the serving layer's snapshots), ``status`` (the status' reads),
``teardown`` (deleting a generation's realtime keys) and ``visit_state`` (the speed layer's open
visits)."""
