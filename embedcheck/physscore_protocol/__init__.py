"""PhysScore (``../shared/specs/physscore.md``): does cosine similarity follow physical quantities?

From the ground floor up: :mod:`.protocol` (phrases, cells, Kendall τ-b, PACC, Table 1),
:mod:`.probe` (Table 3, the recalibration probe) and :mod:`.lexical` (Table 4), then
:mod:`.phrases` (the phrase sets as rows) and :mod:`.tables` (the whole report); :mod:`.plots`
and :mod:`.view` (the terminal tables) sit on top. Nothing here reads files or exits.
"""
