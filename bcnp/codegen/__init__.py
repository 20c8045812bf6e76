"""Code generation from a loaded schema: a standalone Python module and a C++17 header.

Both renderers take a :class:`~bcnp.schema.Schema` (the loader is the single
source of truth for types, sizes, scales and the hash) and return the text of
the file; they are deterministic, so a committed file can be checked for drift.
"""
