"""The compiled parts: AAG's row kernels (embedcheck/geometry/_rowkernels.c) and the neighbourhood passes' tile
kernels (embedcheck/geometry/_tiles.c). Optional: where they cannot be built, embedcheck.geometry.rowsums and
embedcheck.geometry.tiles compute the same results with numpy."""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "embedcheck.geometry._rowkernels", ["embedcheck/geometry/_rowkernels.c"], optional=True,
    # the kernels' bits are fixed by their source order: no fused multiply-add, no reassociation
    extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math"],
), Extension(
    # comparisons only, no arithmetic on the scores
    "embedcheck.geometry._tiles", ["embedcheck/geometry/_tiles.c"], optional=True, extra_compile_args=["-O3"],
)])
