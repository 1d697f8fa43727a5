"""The checkout's scripts, run from its root as modules (``python -m scripts.bench``,
``python -m scripts.studies.coverage``): ``bench/`` the benchmarks, ``studies/`` the calibration
studies, ``data/`` the data preparation; the tools the Makefile and the docs call stay here."""
