"""Calibration studies: how often a verdict is wrong, on synthetic data with a known truth or on
the shared data sets (``python -m scripts.studies.<name>``)."""
