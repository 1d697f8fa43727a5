"""``physscore phrases``: write every phrase the PhysScore protocol embeds to a ``.jsonl``, one JSON
row each (id, set, unit, range, value, text, plus kind / pair / side / panel where they apply), and
its ``.meta.json``, atomically (:mod:`embedcheck.physscore_protocol.phrases`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..report.schemas import COUNTS, INT, STR, obj
from ..spec import Measurement, Option, Outcome, Writes, hint_sink
from .physscore_score import PAPER_CONVERSIONS


def _output(value: Any) -> Path:
    """``output`` as a ``.jsonl`` path (a non-empty str or os.PathLike)."""
    if isinstance(value, (str, os.PathLike)) and not isinstance(value, bytes):
        s = os.fspath(value)
        if isinstance(s, str) and s.strip() and "\x00" not in s:
            path = Path(s)
            if path.suffix.lower() not in (".jsonl", ".ndjson"):
                raise InputError(f"output {path} must be a .jsonl file")
            return path
    shown = repr(value) if len(repr(value)) <= 80 else type(value).__name__
    raise InputError(f"output= must be a path (str or os.PathLike), got {shown}")


def _sets(sets: Any) -> list[str]:
    from ..physscore_protocol import phrases

    if sets is not None and not isinstance(sets, str) and (
            not isinstance(sets, (list, tuple)) or not all(isinstance(s, str) for s in sets)):
        raise InputError(f"sets= must be a comma list or a list of set names, got {sets!r}")
    try:
        return list(phrases.parse_sets(sets))
    except ValueError as exc:
        raise InputError(f"sets=: {exc}") from None


def preflight(inputs: Any, *, options: dict[str, Any], against: Any, margins: Any) -> None:
    """The output and the sets, checked before anything is opened or written."""
    _output(options["output"])
    _sets(options["sets"])


def run(inputs: dict[str, Any], *, engine: Any, seed: int, output: Any, sets: Any, paper_conversions: bool) -> Outcome:
    from ..io.atomic import AtomicBatch
    from ..io.provenance import meta_path, provenance
    from ..physscore_protocol import phrases

    path = _output(output)
    chosen = _sets(sets)
    rows = phrases.phrase_rows(chosen, paper_conversions=paper_conversions)
    counts = {s: sum(r["set"] == s for r in rows) for s in chosen}
    unique = len({r["text"] for r in rows})
    meta = provenance("physscore phrases", {}, {"sets": list(chosen), "paper_conversions": paper_conversions},
                      rows=len(rows), unique_texts=unique, sets=counts)
    with AtomicBatch() as batch:
        batch.save_jsonl(path, rows)
        batch.save_json(meta_path(path), meta)
    say = hint_sink()
    if say is not None:
        say(f"wrote {len(rows)} phrases ({unique} unique) to {path}; next: embedcheck embed {path} -o "
            f"{path.with_name(path.stem + '_emb.npy')}")
    return Outcome(body={"output": str(path), "rows": len(rows), "unique_texts": unique, "sets": counts,
                         "paper_conversions": paper_conversions})


DESCRIPTION = """Write every phrase the PhysScore protocol embeds, one JSON row each.

Rows: id, set, unit, range, value, text (plus kind / pair / side / panel where they apply). The benchmark set is the 5 ranges x 4 units = 452 phrases (412 unique strings); lexical is the 100 seeded number strings of Table 4. Embed the file with `embedcheck embed` (to another name: embed writes OUT.jsonl beside OUT.npy), then score it.

Example: embedcheck physscore phrases -o phrases.jsonl
"""

MEASUREMENT = Measurement(
    name="physscore-phrases", group="physscore",
    help="write every phrase the PhysScore protocol embeds, one JSON row each", run=run, inputs=(),
    options=(Option("output", str, None, "Output .jsonl (written atomically, with a .meta.json sidecar).",
                    aliases=("-o",), required=True, metavar="PATH", show_default=False),
             Option("sets", str, "all", "Comma list of phrase sets: benchmark (Tables 1, 3), lexical (Table 4), "
                    "digits_words and conversion (figures only), or all."),
             PAPER_CONVERSIONS),
    figures={}, version=1, paired=False, api_args=("output",),
    body_schema=obj({"output": STR, "rows": INT, "unique_texts": INT, "sets": COUNTS}),
    writes=(Writes("output", "with-meta"),), runs={"phrases": ("-o", "ph.jsonl")},
    description=DESCRIPTION, engine=False, gates="none", title=lambda given: "PhysScore phrases",
    preflight=preflight,
)
