"""The package version, on the ground floor (the head file format and --version read it)."""

__version__ = "0.1.0"
