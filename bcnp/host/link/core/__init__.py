"""The link's sans-I/O core: its state machine and errors. No sockets, threads or clocks."""
