"""The fault proxy's sans-I/O core: the fault model and the delivery schedule.
No sockets, threads or clocks."""
