"""The storage wing: how each store lays out, writes and reads the platform's data.

One module per kind of store holds its interface, its write half and its read half, and the
values they exchange: ``batch_views``, ``realtime_views``, ``filter_table``, ``manifest``,
``lease``, ``api_keys``, ``salts`` (the generation registry's two stores are the protocol's own
interfaces: generations.storage). ``errors`` is what a store raises when it cannot be reached,
``rows`` how the write halves read a view row, ``realtime_hash`` the realtime hash's layout shared
by Redis and ``memory`` (the in-memory twin). Then one package per backend: ``mongo`` (MongoDB /
FerretDB), ``redis``, ``parquet``; a backend imports no layer and no other backend, and a read half
returns the serving layer's values, decoded here. The layers keep their computation and their
protocol and talk to the stores through these interfaces; reading or writing one stored document
stays inside one backend package.
"""
