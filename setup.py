"""The one compiled part: AAG's row kernels (embedcheck/geometry/_rowkernels.c). Optional: where it cannot be
built, embedcheck.geometry.rowsums computes the same bits with numpy."""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "embedcheck.geometry._rowkernels", ["embedcheck/geometry/_rowkernels.c"], optional=True,
    # the kernels' bits are fixed by their source order: no fused multiply-add, no reassociation
    extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math"],
)])
