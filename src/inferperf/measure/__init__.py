"""Measurement: the timed loop, stop rules, validity, and ``bench()``."""
