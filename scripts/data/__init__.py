"""Data preparation: the fixtures, the retrieval task files, a model fetched from the package index,
the indexes of docs/recall.md (``python -m scripts.data.<name>``)."""
