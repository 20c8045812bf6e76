"""The host's link to one robot: the client, the keeper that holds it up, the dial;
its sans-I/O core in ``core/``."""
