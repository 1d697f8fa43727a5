"""The measurements — pure computation, arrays in, typed results out: :mod:`.aag` (AAG, variance
share, permutation and bootstrap), :mod:`.label_map` (label-retrieval MAP), :mod:`.anisotropy`
(matched cosine against its floor), :mod:`.probe` (logistic-regression probe) and :mod:`.sts`."""
