"""Everything that touches a file: ``.npy`` reading and validation (:mod:`.npy`), labels and scores
(:mod:`.labels`), JSON Lines (:mod:`.jsonio`), text records and input formats (:mod:`.texts`), atomic
writes (:mod:`.atomic`) and provenance sidecars (:mod:`.provenance`). Readers raise
:class:`~embedcheck.errors.InputError` with one line naming the file; nothing here unpickles."""
