"""Realtime views and the generation hot copy on Redis: ``keys`` (the key layout and encodings),
``sink`` (the speed layer's writes, inside its commit transaction), ``reader`` (the serving
layer's snapshots) and ``teardown`` (deleting a generation's realtime keys)."""
