"""``embedcheck sts``: placeholder until written."""
