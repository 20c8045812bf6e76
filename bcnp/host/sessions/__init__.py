"""Host sessions over a link that may drop: replay and follow, each a sans-I/O core in ``core/``
driven by one loop that pulls."""
