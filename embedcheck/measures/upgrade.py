"""``upgrade``: keep the old model's index, bridge new-model queries into it, or re-embed? Adapters
fitted on rows paired by id, the four arms (keep, bridge, re-embed, migrate) scored on the same
queries, the recovered share with its paired interval, and a decision from a stated rule; with
``-o``, the bridge adapter's file (:mod:`embedcheck.heads.adapter`), applied by ``project --adapter``.
The maths: :mod:`embedcheck.geometry.upgrade`."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..geometry.upgrade import METHODS, ORTHOGONAL
from ..report.result import Figure
from ..report.schemas import COSINE, FRACTION, PERCENT
from ..spec import Input, Measurement, Option, Outcome, Verdict, Writes
from . import comma_choices


def _ids_of(src: Any, what: str) -> list[Any]:
    """The ids of ``src``'s rows, checked as rows paired by id need them: present for every row (a
    sidecar or id column whose count is the row count — when it is not, the reader says why), each a
    string or an integer, none repeated (``5`` and ``"5"`` are one id: :func:`embedcheck.io.rowids.match_rows`'s
    rule)."""
    ids = src.ids()
    if ids is None:
        if src.parts[0].array is None:  # a file, shard set or store: its reader names what is wrong with its ids
            from ..io.retrieval import read_ids

            read_ids(src.name, what=what, option="an id in every record", n_rows=src.n)
        raise InputError(f"{what} {src.name}: its rows carry no ids (a sidecar .jsonl or an id column): rows are paired by id")
    for i, v in enumerate(ids):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (str, int, np.integer)):
            shown = "no id" if v is None else f"id {v!r:.40} ({type(v).__name__})"
            raise InputError(f"{what} {src.name}: row {i} has {shown}; ids must be strings or integers: rows are paired by id")
    from ..io.rowids import refuse_repeated_ids

    refuse_repeated_ids(ids, f"{what} {src.name}", "rows are paired by id")
    return list(ids)


def _pairs(old_ids: list[Any], new_ids: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """The OLD and NEW row of each pair, in OLD's row order (so the pairs, their split and every figure do
    not depend on the order of NEW's rows); ids compare as text (``5`` and ``"5"`` are one id). Both
    sides come from :func:`_ids_of`, which has refused repeated ids."""
    from ..io.rowids import id_key

    pos = {id_key(k): i for i, k in enumerate(old_ids)}
    keys = [id_key(k) for k in new_ids]
    miss = [k for k, key in zip(new_ids, keys) if key not in pos]
    if miss:
        raise InputError(f"NEW: {len(miss)} of its {len(new_ids)} rows pair with no OLD row by id "
                         f"(e.g. {miss[0]!r}; OLD has {len(old_ids)} rows)")
    o_rows = np.array([pos[k] for k in keys], dtype=np.int64)
    order = np.argsort(o_rows, kind="stable")
    return o_rows[order], order.astype(np.int64)


def _record(src: Any) -> dict[str, Any]:
    """An input as the project records it (:func:`embedcheck.io.provenance.input_record`: a file's
    sha256, a shard set's manifest's; a store by its name; an array by the sha256 of its rows as
    little-endian float32), with the sha256 of its ``.jsonl`` rows (the ids that pair it)."""
    import hashlib
    from pathlib import Path

    from ..io import provenance

    part = src.parts[0]
    if part.store:
        from ..io.stores import display_name

        return {"store": display_name(part.store)}
    if part.array is not None:
        h = hashlib.sha256()
        for p in src.parts:
            h.update(np.ascontiguousarray(p.read(), dtype="<f4").tobytes())
        return {"array": src.name, "array_sha256": h.hexdigest()}
    rec = dict(provenance.input_record(src.name))
    if src.sidecar and Path(src.sidecar).is_file():
        rec["jsonl_sha256"] = provenance.sha256_file(src.sidecar)
    return rec


def _labels(old: Any, labels: str, field: str = "label") -> tuple[np.ndarray, str]:
    """``--old-labels``: one label per OLD row (a labels file or table, its ``field`` column — ``--label-field``,
    default ``label``; matched to OLD's rows by id as ``aag`` matches them: the same set, reordered by id),
    and how they matched."""
    from ..io.labels import labels_for

    part = old.parts[0]
    rows = part.store or (old.name if part.array is None else None)
    matched: dict[str, str] = {}
    y = labels_for(labels, old.n, field, what="--old-labels", rows=rows, matched=matched, key="labels")
    return np.asarray(y), matched["labels"]


def _model(src: Any) -> dict[str, Any]:
    """The model an input was written by (its metadata: ``.meta.json``, a shard set's manifest, a
    store's), else its file name."""
    from pathlib import Path

    from ..io.retrieval import artifact_model

    part = src.parts[0]
    if part.array is None:
        try:
            m = artifact_model(part.store or src.name)
        except (InputError, OSError, ValueError):
            m = None
        if m:
            return {"name": m, "from": "metadata"}
    return {"name": Path(src.name).name if part.array is None else src.name, "from": "file name"}


def _adapter_file(a: Any, fit: dict[str, Any], old: Any, new: Any, body: dict[str, Any], *, holdout: float,
                  seed: int, scored_on: dict[str, Any]) -> bytes:
    """The bridge adapter's file (:mod:`embedcheck.heads.adapter`: the head format, kind ``adapter``)
    and its manifest: direction, models, dimensions, method, hyper-parameters, held-out fit
    figures, the inputs it was fitted on."""
    from ..heads import adapter as HA
    from ..version import __version__

    m = a.method
    manifest = {
        "direction": HA.BRIDGE,
        "maps": "new-model vectors (queries) into the old model's space: search the old index with them",
        "models": {"new": _model(new), "old": _model(old)},
        "input_dim": a.source_dim, "output_dim": a.target_dim,
        "method": m, "orthogonal": m in ORTHOGONAL,
        "hyperparameters": {k: v for k, v in a.params.items()},
        "fit": {k: fit[k] for k in ("heldout_cosine", "variance_explained", "train_cosine", "parameters")},
        "fitted_on": {"pairs": body["pairs"], "train_pairs": body["train_pairs"], "heldout_pairs": body["heldout_pairs"],
                      "holdout": holdout, "seed": seed},
        "bridge_arm": {"score": body["arms"][f"bridge:{m}"], "scored_by": body["scored_by"],
                       "chosen_by_report": m == body["chosen"]},
        "inputs": {"old": _record(old), "new": _record(new), **scored_on},
        "input_normalisation": "l2", "output_normalisation": "l2",
        "apply": "embedcheck project NEW_QUERIES.npy --adapter FILE --side queries -o OUT.npy",
        "embedcheck_version": __version__,
    }
    return HA.to_bytes(a, manifest)


def run(inputs: dict[str, Any], *, engine: Any, seed: int, queries_old: Optional[str], queries_new: Optional[str],
        qrels: Optional[str], method: str, k: int, holdout: float, decision_margin: float, resamples: int,
        mlp_epochs: int, output: Optional[str] = None, adapter_method: Optional[str] = None,
        old_labels: Optional[str] = None, label_field: str = "label", index: Optional[str] = None,
        migrated_index: Optional[str] = None, index_set: Optional[list[str]] = None,
        reindex_margin: float = 0.05, fit_pairs: Optional[int] = None) -> Outcome:
    from ..geometry import upgrade as U
    from ..geometry.retrieval import id_bytes, ranking_ties
    from ..io.source import open_source

    old, new = inputs["old"], inputs["new"]
    methods = comma_choices(method, U.METHODS, "--method")
    if old.dim != new.dim and "identity" in methods:
        if method.strip() != "all":
            raise InputError(f"--method identity: OLD has dimension {old.dim} and NEW {new.dim}; the identity maps "
                             "only between equal dimensions")
        methods.remove("identity")  # 'all': every method that applies
    if output is not None and not str(output).lower().endswith(".safetensors"):
        raise InputError(f"output {output} must end in .safetensors (the adapter file)")
    if adapter_method is not None:
        if output is None:
            raise InputError("adapter_method chooses the adapter that -o writes: give -o (output=) too")
        if adapter_method not in methods:
            raise InputError(f"adapter_method {adapter_method} was not fitted: --method {method} fits "
                             f"{', '.join(methods)}")
    old_ids = _ids_of(old, "OLD")
    o_rows, n_rows = _pairs(old_ids, _ids_of(new, "NEW"))
    npairs = len(o_rows)
    need = max(U.MIN_PAIRS[m] for m in methods)
    if npairs < need:
        raise InputError(f"NEW: {npairs} rows pair with OLD by id; --method {method} needs at least {need} paired rows")
    if fit_pairs is not None and fit_pairs > npairs:
        raise InputError(f"fit_pairs must be at most the {npairs} paired rows, got {fit_pairs}")
    if fit_pairs is not None and fit_pairs < need:
        raise InputError(f"fit_pairs {fit_pairs}: --method {method} needs at least {need} paired rows")
    if (queries_old is None) != (queries_new is None):
        raise InputError("--queries-old and --queries-new go together: the same queries under both models")
    if queries_old is None:
        raise InputError("--queries-old and --queries-new are needed: the arms are scored on queries")
    qo_src = open_source(queries_old, what="--queries-old")
    qn_src = open_source(queries_new, what="--queries-new")
    if qo_src.n != qn_src.n:
        raise InputError(f"--queries-old has {qo_src.n} rows but --queries-new has {qn_src.n}: the same queries under both models")
    if qo_src.n < 2:
        raise InputError(f"--queries-old {qo_src.name}: {qo_src.n} query; the arms are compared by paired intervals "
                         "over queries, which need at least 2")
    qo_ids, qn_ids = qo_src.ids(), qn_src.ids()
    q_order = None  # --queries-new's rows in --queries-old's order (the same ids in another order: matched by id)
    if qo_ids is not None and qn_ids is not None:
        from ..io.rowids import id_key, match_rows

        ko, kn = [id_key(v) for v in qo_ids], [id_key(v) for v in qn_ids]
        if sorted(ko) != sorted(kn):
            diff = next(i for i, (a, b) in enumerate(zip(ko, kn)) if a != b)
            raise InputError(f"--queries-old and --queries-new differ in ids from row {diff} ({qo_ids[diff]!r} vs {qn_ids[diff]!r})")
        q_order = match_rows(qo_ids, qn_ids, names=(f"--queries-old {qo_src.name}", f"--queries-new {qn_src.name}")).order
    if qo_src.dim != old.dim:
        raise InputError(f"--queries-old: dimension {qo_src.dim}, OLD has {old.dim}")
    if qn_src.dim != new.dim:
        raise InputError(f"--queries-new: dimension {qn_src.dim}, NEW has {new.dim}")
    if migrated_index is not None and index is None:
        raise InputError("--migrated-index needs --index (the old index: its recall on the vectors it was built for)")
    if index_set and index is None:
        raise InputError("--index-set needs --index")
    from .upgrade_index import parse_settings

    settings = parse_settings(index_set)
    y = _labels(old, old_labels, label_field) if old_labels is not None else None  # read (and matched) before any fitting
    if y is not None and len(np.unique(y[0][o_rows])) < 2:
        raise InputError(f"--old-labels {old_labels}: its column {label_field!r} holds one class over the paired rows; "
                         "AAG and label MAP need at least two")
    # every row read checked (NaN/inf, all-zero, overflowing rows refused), the error naming the input
    Xo, Xn, Qo, Qn = (U.unit(np.asarray(src.rows(0, src.n, check=True, what=what), dtype=np.float64))
                      for src, what in ((old, "OLD"), (new, "NEW"), (qo_src, "--queries-old"), (qn_src, "--queries-new")))
    if q_order is not None:
        Qn = Qn[q_order]
    Po, Pn = Xo[o_rows], Xn[n_rows]  # the paired rows
    fit_rows = U.fit_subset(npairs, fit_pairs, seed)  # the paired rows the adapters are fitted on
    tr, he = U.split(len(fit_rows), holdout, seed)
    train, held = fit_rows[tr], fit_rows[he]
    adapters: dict[str, Any] = {}
    fits = []
    for m in methods:
        a, figs = U.fit_chosen(m, Pn, Po, train, held, epochs=mlp_epochs, seed=seed)  # bridge: new -> old
        adapters[m] = a
        fits.append({"method": m, **{k2: U.finite(v) if isinstance(v, float) else v for k2, v in figs.items()},
                     "params": a.params})
    best = max(methods, key=lambda m: next(f["heldout_cosine"] for f in fits if f["method"] == m))
    mig, mig_figs = U.fit_chosen(best, Po, Pn, train, held, epochs=mlp_epochs, seed=seed)  # migrate: old -> new
    # the scored corpus: the paired rows (the whole corpus when NEW covers every OLD row)
    whole = npairs == old.n
    doc_ids = [old_ids[i] for i in o_rows]
    ranks = ranking_ties(doc_ids, len(doc_ids))
    kk = min(k, npairs)
    # every arm's exact search runs as tasks on the run's engine (the maps are applied here, on the driver)
    runs = {"keep": U.topk(Qo, Po, kk, ranks, engine=engine), "re-embed": U.topk(Qn, Pn, kk, ranks, engine=engine),
            "migrate": U.topk(Qn, mig.apply(Po), kk, ranks, engine=engine)}
    for m in methods:
        runs[f"bridge:{m}"] = U.topk(adapters[m].apply(Qn), Po, kk, ranks, engine=engine)
    runs["bridge"] = runs[f"bridge:{best}"]
    body: dict[str, Any] = {"pairs": npairs, "old_rows": old.n, "new_rows": new.n, "old_dim": old.dim,
                            "new_dim": new.dim, "queries": qo_src.n, "k": kk, "fit_pairs": int(len(fit_rows)),
                            "train_pairs": int(len(train)),
                            "heldout_pairs": int(len(held)),
                            "corpus": ("the whole corpus (NEW covers every OLD row)" if whole else
                                       f"the {npairs} paired rows' sub-corpus (NEW covers {npairs} of {old.n} OLD rows): "
                                       "every arm is scored on it"),
                            "adapters": fits, "chosen": best,
                            "migrate_adapter": {"method": best, **{k2: U.finite(v) if isinstance(v, float) else v
                                                                   for k2, v in mig_figs.items()}}}
    from ..stats.paired import paired_items

    if qrels is not None:
        from ..geometry.retrieval import build_qrels, evaluate_run
        from ..io.retrieval import qrels_of

        qq, dd, gg = qrels_of(qrels)
        if qo_ids is None:
            raise InputError("--queries-old: its rows carry no ids: --qrels names queries by id")
        qids = id_bytes(list(qo_ids))
        all_docs = id_bytes(old_ids)
        stray = ~np.isin(dd, all_docs)
        if stray.any():  # as retrieve refuses them: a document in no OLD row
            i = int(np.flatnonzero(stray)[0])
            raise InputError(f"--qrels {qrels} names {len(np.unique(dd[stray]))} document id(s) that are in no OLD row "
                             f"(e.g. {dd[i].decode('utf-8', 'replace')!r}, line {i + 1} of the judgements)")
        keepj = np.isin(dd, id_bytes(doc_ids))
        if not keepj.any():
            raise InputError(f"--qrels {qrels}: none of its {len(dd)} judgements is of a paired row (NEW covers "
                             f"{npairs} of {old.n} OLD rows; every arm is scored on them)")
        judged = build_qrels(qq[keepj], dd[keepj], gg[keepj], qids, id_bytes(doc_ids), what=f"--qrels {qrels}")
        relevant = int(np.count_nonzero(judged.n_relevant))
        if len(judged.query_rows) < 2 or relevant == 0:
            raise InputError(f"--qrels {qrels}: {len(judged.query_rows)} judged queries over the scored rows, {relevant} "
                             "with a relevant document (grade above 0); the arms' paired intervals need at least 2 "
                             "judged queries and a relevant document")
        per = {name: evaluate_run(r, judged, (10,), n_docs=npairs) for name, r in runs.items()}
        score = {name: p["ndcg_at_10"] for name, p in per.items()}
        body["scored_by"] = "nDCG@10 against --qrels (trec_eval's definitions, as retrieve)"
        body["provisional"] = False
        body["judged_queries"] = int(len(judged.query_rows))
    else:
        ref = runs["re-embed"]
        score = {name: U.overlap_at_k(r, ref, kk) for name, r in runs.items()}
        per = {name: {"overlap_at_k": s} for name, s in score.items()}
        body["scored_by"] = f"overlap@{kk} with the re-embedded top {kk} (no --qrels): provisional"
        body["provisional"] = True
    arms = U.arm_intervals(per, resamples, seed)  # each arm's figures with their intervals over queries
    for m in methods:  # each adapter's bridge against keep and re-embed, as the chosen one's below
        rec_m = U.recovered_share(score["keep"], score[f"bridge:{m}"], score["re-embed"], resamples, seed)
        vk = paired_items(score["keep"], score[f"bridge:{m}"], resamples=resamples, permutations=0, seed=seed).to_dict()
        arms[f"bridge:{m}"].update({"vs_keep": vk["difference"], "vs_keep_ci95": vk["difference_ci95"],
                                    "recovered": rec_m["value"], "recovered_ci95": rec_m["ci95"]})
    body["arms"] = arms
    scored = "ndcg_at_10" if qrels is not None else "overlap_at_k"
    for name in ("keep", "bridge", "re-embed", "migrate"):
        body[name.replace("-", "_")] = float(np.mean(score[name]))
        body[f"{name.replace('-', '_')}_ci95"] = arms[name][f"{scored}_ci95"]

    def pf(a: str, b: str) -> dict[str, Any]:
        r = paired_items(score[a], score[b], resamples=resamples, permutations=0, seed=seed).to_dict()
        return {"difference": r["difference"], "ci95": r["difference_ci95"]}

    gain, b_re, b_keep = pf("keep", "re-embed"), pf("re-embed", "bridge"), pf("keep", "bridge")
    body["gain"], body["gain_ci95"] = gain["difference"], gain["ci95"]
    body["bridge_vs_reembed"], body["bridge_vs_reembed_ci95"] = b_re["difference"], b_re["ci95"]
    body["bridge_vs_keep"], body["bridge_vs_keep_ci95"] = b_keep["difference"], b_keep["ci95"]
    rec = U.recovered_share(score["keep"], score["bridge"], score["re-embed"], resamples, seed)
    body["recovered"], body["recovered_ci95"] = rec["value"], rec["ci95"]
    body["recovered_resamples_without_gain"] = rec["resamples_without_gain"]
    decision, why = U.decide(gain["ci95"], b_re["ci95"], b_keep["ci95"], decision_margin)
    body["decision"], body["decision_because"], body["rule"] = decision, why, U.RULE
    body["decision_keep"] = 1.0 if decision == "keep" else 0.0
    body["decision_margin"] = decision_margin
    body["ci_method"] = f"paired bootstrap over queries, {resamples} resamples, seed {seed}"
    items = {name.replace("-", "_"): np.asarray(score[name], dtype=np.float64) for name in ("keep", "bridge", "re-embed", "migrate")}
    if y is not None:
        from ..rows import content_sha256

        lab = y[0][o_rows]
        geo = U.attribute_geometry({"new": Pn, "bridged": U.unit(adapters[best].apply(Pn)), "old": Po}, lab, seed=seed)
        body["labels"] = {"rows": npairs, "classes": int(len(np.unique(lab))), "bridged_by": best,
                          "on": "the paired rows (train and held-out): NEW's vectors, NEW's mapped by the chosen "
                                "bridge into the old space, OLD's vectors", **geo,
                          "aag_change": geo["aag"]["bridged"] - geo["aag"]["new"],
                          "label_map_change": geo["label_map"]["bridged"] - geo["label_map"]["new"],
                          "labels_sha256": content_sha256(lab), "rows_matched_by": y[1]}
    if index is not None:
        from .upgrade_index import index_arms

        body["index"] = index_arms(index, migrated_index, Qo=Qo, bridged=U.unit(adapters[best].apply(Qn)), Qn=Qn,
                                   migrate_map=mig, new_dim=new.dim, old_dim=old.dim, k=k, settings=settings,
                                   margin=reindex_margin, resamples=resamples, seed=seed, engine=engine)
    files = {}
    if output is not None:
        written = adapter_method or best
        fit = next(f for f in fits if f["method"] == written)
        from ..io.provenance import input_record

        scored_on = {"queries_old": _record(qo_src), "queries_new": _record(qn_src),
                     **({"qrels": input_record(qrels)} if qrels is not None else {})}  # what the bridge arm was scored on
        files["output"] = _adapter_file(adapters[written], fit, old, new, body, holdout=holdout, seed=seed,
                                        scored_on=scored_on)
        body["adapter_file"] = {"output": str(output), "method": written, "direction": "new->old",
                                "input_dim": adapters[written].source_dim, "output_dim": adapters[written].target_dim}
    return Outcome(body=body, items=items, files=files)


MEASUREMENT = Measurement(
    name="upgrade",
    help="a new model without re-embedding? keep, bridge or re-embed, decided on your queries",
    description=("Adapters (orthogonal Procrustes, ridge, low-rank, residual MLP; and the identity, nothing fitted, "
                 "when the dimensions match) fitted on the rows of OLD and NEW "
                 "paired by id (a train split; hyper-parameters and the chosen adapter by the held-out pairs), and "
                 "four arms on the same queries: keep (old queries, old index), bridge (new queries mapped into the "
                 "old index), re-embed (new queries, new vectors) and migrate (old documents mapped into the new "
                 "space). nDCG@10 with --qrels (else overlap@k with re-embed, provisional), the gain, the recovered "
                 "share (bridge - keep) / (re-embed - keep) with a paired bootstrap interval and a decision.\n\n"
                 "Example: embedcheck upgrade old.npy new.npy --queries-old qo.npy --queries-new qn.npy"),
    run=run,
    inputs=(Input("old", help="The corpus as indexed today (any matrix source with row ids)."),
            Input("new", help="The new model's vectors of some or all of the same rows (ids as in OLD).")),
    options=(Option("queries_old", str, None, "The queries under the old model (any matrix source)."),
             Option("queries_new", str, None, "The same queries under the new model (same count and ids)."),
             Option("qrels", str, None, "Relevance judgements (BEIR TSV or JSONL; ids from the sidecars)."),
             Option("method", str, "all", "Adapters: 'all' or a comma list of identity (nothing fitted: the new "
                    "vectors as they are; equal dimensions only, which 'all' then includes), procrustes, ridge, "
                    "low-rank, mlp."),
             Option("k", int, 10, "Top k of the overlap score without --qrels, and of --index's recall@k.", min=1),
             Option("holdout", float, 0.2, "Share of the paired rows held out for choosing.", min=0.05, max=0.5),
             Option("decision_margin", float, 0.01, "Decision margin on the score (nDCG@10 or overlap).", min=0.0, max=1.0),
             Option("resamples", int, 1000, "Bootstrap resamples over queries.", min=10),
             Option("mlp_epochs", int, 30, "Epochs of the residual MLP adapter.", min=1),
             Option("output", str, None, "Write the bridge adapter (new -> old; the one the report chooses) to this "
                    ".safetensors file with its manifest; apply it with project --adapter.", aliases=("-o",),
                    metavar="FILE", show_default=False),
             Option("old_labels", str, None, "Labels of OLD's rows (a file or table with ids, its --label-field column): AAG and "
                    "label MAP of the paired rows before and after the bridge.", metavar="FILE", show_default=False),
             Option("fit_pairs", int, None, "Fit the adapters on a seeded sample of this many paired rows (train and "
                    "held-out); the arms are still scored on every paired row. Default: all.", min=2,
                    show_default=False),
             Option("label_field", str, "label", "The column of --old-labels holding the label."),
             Option("index", str, None, "The old model's ANN index, as recall takes it (a FAISS or hnswlib file, "
                    "postgresql://...?table=T&column=C, lancedb://DBDIR/TABLE): its recall@k on the old queries, the "
                    "bridged queries and the migrated documents, and REINDEX needed.", metavar="INDEX", show_default=False),
             Option("migrated_index", str, None, "With --index: a copy of it whose stored vectors were rewritten in place "
                    "by the migrate map, not rebuilt (a database is never written; without it a FAISS or hnswlib "
                    "file is rewritten in a temporary copy).", metavar="INDEX", show_default=False),
             Option("index_set", str, None, "A search setting of --index (nprobe, efSearch, ef, ivfflat.probes, "
                    "hnsw.ef_search ...); repeatable.", metavar="NAME=V", multiple=True, show_default=False),
             Option("reindex_margin", float, 0.05, "REINDEX needed when the migrated documents' recall@k falls more "
                    "than this below the index's recall on the vectors it was built for.", min=0.0, max=1.0),
             Option("adapter_method", str, None, "The adapter -o writes instead of the chosen one (one fitted by --method).",
                    choices=METHODS, show_default=False)),
    writes=(Writes("output", "file"),),
    runs={"": ("retrieve_corpus.npy", "retrieve_corpus.npy", "--queries-old", "retrieve_queries.npy",
               "--queries-new", "retrieve_queries.npy", "--method", "procrustes", "--resamples", "100",
               "-o", "adapter.safetensors")},
    figures={
        "recovered": Figure("higher", interval="recovered_ci95", always=False,
                            help="(bridge - keep) / (re-embed - keep): the share of the upgrade's gain the bridge keeps"),
        "gain": Figure("higher", interval="gain_ci95", help="re-embed - keep: what a full re-embedding gains"),
        "keep": Figure("higher", headline=False, interval="keep_ci95", unit=FRACTION, range=(0, 1)),
        "bridge": Figure("higher", headline=False, interval="bridge_ci95", unit=FRACTION, range=(0, 1)),
        "re_embed": Figure("higher", headline=False, interval="re_embed_ci95", unit=FRACTION, range=(0, 1)),
        "migrate": Figure("higher", headline=False, interval="migrate_ci95", unit=FRACTION, range=(0, 1)),
        "decision_keep": Figure("lower", headline=False, help="1 when the decision is keep (the gate is --fail-on keep)"),
        "labels.aag.bridged": Figure("higher", headline=False, always=False, reference="labels.aag.new", unit=COSINE,
                                     range=(-2, 2), help="AAG of the bridged rows (with --old-labels); read against the new vectors'"),
        "labels.label_map.bridged": Figure("higher", headline=False, always=False, reference="labels.label_map.new",
                                           unit=PERCENT, range=(0, 100),
                                           help="label MAP x100 of the bridged rows (with --old-labels); read against the new vectors'"),
        "index.built_for.recall": Figure("higher", headline=False, always=False, interval="index.built_for.recall_ci95",
                                         unit=FRACTION, range=(0, 1),
                                         help="with --index: its recall@k on the old queries, the vectors it was built for"),
        "index.bridge.recall": Figure("higher", headline=False, always=False, interval="index.bridge.recall_ci95",
                                      unit=FRACTION, range=(0, 1), reference="index.built_for.recall",
                                      help="with --index: its recall@k on the bridged queries"),
        "index.migrate.recall": Figure("higher", headline=False, always=False, interval="index.migrate.recall_ci95",
                                       unit=FRACTION, range=(0, 1), reference="index.built_for.recall",
                                       help="with --index: its recall@k on the migrated documents, not rebuilt"),
        "index.bridge.drop": Figure("lower", headline=False, always=False, interval="index.bridge.drop_ci95",
                                    help="built-for recall - the bridged queries' recall"),
        "index.migrate.drop": Figure("lower", headline=False, always=False, interval="index.migrate.drop_ci95",
                                     help="built-for recall - the migrated documents' recall"),
        "index.reindex_needed": Figure("lower", headline=False, always=False,
                                       help="1 when REINDEX is needed (gate: --fail-above index.reindex_needed=0.5)"),
    },
    primary="gain",
    verdicts=(Verdict("decision", ("keep", "bridge", "re-embed", "inconclusive"), shown="upgrade decision",
                      help="the decision of the stated rule (rule, decision_because)"),),
    tolerance=1e-6,
    example=("retrieve_corpus.npy", "retrieve_corpus.npy", "--queries-old", "retrieve_queries.npy",
             "--queries-new", "retrieve_queries.npy", "--qrels", "retrieve_qrels.tsv", "--method", "procrustes,ridge",
             "--resamples", "100"),
)

__all__ = ["MEASUREMENT", "run"]
