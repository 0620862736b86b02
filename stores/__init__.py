"""The storage wing: how each store lays out, writes and reads the platform's data.

``stores.base`` holds the interfaces (each kind of store with its write half and its read half),
``stores.memory`` their in-memory twin, and one package per backend: ``stores.mongo`` (batch views
on MongoDB / FerretDB) and ``stores.redis`` (realtime views on Redis). The layers keep their
computation and their protocol, and talk to the stores through these interfaces; reading or
writing one stored document stays inside one backend package.
"""
