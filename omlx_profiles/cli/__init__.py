"""Command-line interface: one module per command (``cmd_<name>.py``), wired up in ``main.py``."""
