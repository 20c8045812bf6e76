"""The drivetrain: its decisions for any wiring, the hardware seam per wiring,
the turn loop, the interlocks."""
