"""Everything that touches a file: ``.npy`` header checks (:mod:`.npyfile`), reading and validation
(:mod:`.npy`), sharded artifacts — a folder of ``.npy`` shards with a manifest (:mod:`.shards`), labels and scores
(:mod:`.labels`), JSON Lines (:mod:`.jsonio`), text records and input formats (:mod:`.texts`), atomic
writes (:mod:`.atomic`) and provenance sidecars (:mod:`.provenance`). Readers raise
:class:`~embedcheck.errors.InputError` with one line naming the file; nothing here unpickles."""

#: the label formats every command reads (:mod:`.labels`), said once for every help text (the CLI's and
#: the declared options')
LABEL_FORMATS = ("a 1-D .npy, .txt (one per line), or a table (.jsonl, .csv, .tsv, .parquet, or the store holding "
                 "the vectors) read by --label-field")
#: what every embedding argument accepts besides a .npy (docs/stores.md), said once for every help text
STORES_HELP = ("a shard set, PATH.parquet (or a folder of them), PATH.arrow, lancedb://DBDIR/TABLE, a .lance folder, "
               "postgresql://...?table=T&column=C or PATH.faiss (?column=NAME, ?id=NAME after a path; see docs/stores.md)")
