"""embedcheck: does the cosine geometry of an embedding space reflect what you care about?

The computation modules (``geometry``, ``anisotropy``, ``probe``, ``head``, ``physscore``,
``encode``) take arrays and return plain results; only ``embedcheck.cli`` does I/O.
"""

__version__ = "0.1.0"
