"""Statistics shared by the measuring commands: paired comparison of two embeddings of the same
rows (:mod:`embedcheck.stats.paired`) and the bias-corrected bootstrap interval it is built on.

Pure numpy (scipy only for the normal quantile); no terminal I/O.
"""
