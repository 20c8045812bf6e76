"""The network fault proxy: relays for TCP and UDP around a sans-I/O fault model and
delivery schedule (``core/``)."""
