"""``retrieve``: retrieval quality of precomputed query and document vectors, judged by qrels —
nDCG, MAP, recall, P and MRR at each cut-off, as MTEB's evaluator (trec_eval) computes them, with
intervals over queries; ``--rerank`` compares a hubness repair with plain cosine, ``--against`` a
second embedding of the same rows. The maths: :mod:`embedcheck.geometry.retrieval` (metrics, tie
rule) and :mod:`embedcheck.geometry.search` (the exact search); ids and qrels:
:mod:`embedcheck.io.retrieval`.

>>> import numpy as np, embedcheck
>>> Q = np.array([[1.0, 0.0], [0.0, 1.0]]); C = np.array([[1.0, 0.1], [0.1, 1.0], [1.0, 1.0]])
>>> r = embedcheck.retrieve(Q, C, {"q1": {"a": 1}, "q2": {"b": 1}}, k=(1, 3), resamples=0,
...                         query_ids=["q1", "q2"], doc_ids=["a", "b", "c"])
>>> r.metrics["ndcg_at_1"], r.to_dict()["queries"]
(1.0, 2)
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..geometry.hubness import REPAIRS
from ..geometry.retrieval import K_VALUES, check_k_values, retrieval_figures
from ..report.schemas import INT, INTERVAL, NUM, STR, obj
from ..spec import Input, Measurement, Option, Outcome, Writes

#: what ``--help`` says of the inputs
_VECTORS = ("vectors: .npy (ids in its .jsonl sidecar), a shard set or a store (ids from its id column; "
            "docs/stores.md).")


@dataclass(frozen=True)
class Judgements:
    """The qrels, read once: ``(query ids, corpus ids, grades)`` (bytes, bytes, int64), how messages
    name them and their content hash (the report's ``inputs.qrels_sha256``)."""

    queries: np.ndarray
    docs: np.ndarray
    grades: np.ndarray
    where: str
    sha256: str


def open_qrels(x: Any, ctx: Any) -> Judgements:
    """QRELS: a BEIR/MTEB TSV or JSONL path, a ``{query_id: {doc_id: grade}}`` mapping or triples,
    read once by the one qrels reader (:func:`embedcheck.io.retrieval.qrels_of`)."""
    from ..io.retrieval import is_path, qrels_of
    from ..rows import content_sha256

    qq, dd, gg = qrels_of(x)
    sha = content_sha256(sorted(f"{q!r}\t{d!r}\t{g}" for q, d, g in zip(qq.tolist(), dd.tolist(), gg.tolist())))
    return Judgements(qq, dd, gg, f"qrels {x}" if is_path(x) else "qrels", sha)


def _locator(src: Any) -> Optional[str]:
    """The path or store locator a source was opened from; None for an array (or rows in memory)."""
    part = src.parts[0] if src.parts else None
    if part is not None and part.store:
        return str(part.store)
    return src.name if src.sidecar is not None or src.shard_set is not None else None


def _role(src: Any, role: str) -> str:
    """An input as a message names it: its role and, for a file or store, its name (``queries q.npy``)."""
    from ..io.stores import display_name

    loc = _locator(src)
    return f"{role} {display_name(loc)}" if loc is not None else role


def _ids(given: Optional[Sequence[Any]], src: Any, field: str, what: str, param: str) -> np.ndarray:
    """The ids of a source's rows: ``given``, else its sidecar's (or store's) ``field``, else the
    per-row field it carries (another embedding put in A's row order)."""
    from ..io.retrieval import id_bytes, ids_of

    loc = _locator(src)
    if given is None and loc is None and src.column(field) is not None:
        return id_bytes([str(v) for v in src.column(field)])
    return ids_of(given, loc, field, what, param, src.n)


def _model(q: Any, c: Any) -> Optional[str]:
    """The model both inputs were embedded with (refused when they name two)."""
    from ..io.retrieval import artifact_model
    from ..io.stores import display_name

    lq, lc = _locator(q), _locator(c)
    if lq is None or lc is None:
        return None
    mq, mc = artifact_model(lq), artifact_model(lc)
    if mq is not None and mc is not None and mq != mc:
        raise InputError(f"queries {display_name(lq)} were embedded with {mq} but corpus {display_name(lc)} "
                         f"with {mc}; retrieval compares vectors of one model")
    return mq or mc


def _paired_plan(ks: list[int], margins: Optional[Mapping[str, float]],
                 resamples: int) -> tuple[list[str], dict[str, float]]:
    """The metrics compared (nDCG@10 and every metric given a margin) and the margins by key."""
    from ..geometry.retrieval import FAMILIES, metric_key
    from ..stats.paired import check_margin

    if resamples < 2:
        raise InputError(f"resamples must be >= 2 for a paired comparison, got {resamples}")
    known = [f"{f}_at_{k}" for f in FAMILIES for k in ks]
    by_key: dict[str, float] = {}
    for name, x in (margins or {}).items():
        key = metric_key(name)
        if key not in known:
            raise InputError(f"margin {name!r}: no such metric; e.g. ndcg@10, map@100, recall@1000, p@5, mrr@10 "
                             f"at a cut-off of k ({', '.join(map(str, ks))})")
        by_key[key] = float(check_margin(x, f"margin {name}") or 0.0)
    return ["ndcg_at_10", *(k for k in known if k in by_key and k != "ndcg_at_10")], by_key


def run(inputs: dict[str, Any], *, engine: Any, seed: int, k: list[int], query_id_field: str, doc_id_field: str,
        resamples: int, rerank: Optional[str], mteb_json: Optional[str], task_name: str, dataset_revision: str,
        split: str, query_ids: Optional[Sequence[Any]], doc_ids: Optional[Sequence[Any]], score: Any,
        score_name: str) -> Outcome:
    from ..geometry.retrieval import build_qrels, cosine, ranking_ties, run_figures
    from ..geometry.search import search_topk

    t0 = time.perf_counter()
    ks = check_k_values([*k, 10])  # nDCG@10, the main score, always
    q_src, c_src, judgements = inputs["queries"], inputs["corpus"], inputs["qrels"]
    if q_src.dim != c_src.dim:
        raise InputError(f"{_role(q_src, 'queries')} have dimension {q_src.dim} but {_role(c_src, 'the corpus')} "
                         f"has {c_src.dim}; embed both with the same model")
    model = _model(q_src, c_src)
    qids = _ids(query_ids, q_src, query_id_field, "queries", "query_ids")
    dids = _ids(doc_ids, c_src, doc_id_field, "corpus", "doc_ids")
    paired_metrics: list[str] = []
    if rerank is not None:
        paired_metrics, _ = _paired_plan(ks, None, resamples)
    judged = build_qrels(judgements.queries, judgements.docs, judgements.grades, qids, dids, what=judgements.where)
    n = c_src.n
    ranks = ranking_ties(dids, n)
    score_fn = score if score is not None else cosine
    found = search_topk(q_src, c_src, max(ks), ranks, score=score_fn, engine=engine)
    body, per_query, evaluated = run_figures(found, judged, k_values=ks, n_queries=q_src.n, n_docs=n, dim=q_src.dim,
                                             resamples=resamples, seed=seed, query_ids=qids, score=score_name,
                                             model=model)
    body["inputs"] = {"qrels_sha256": judgements.sha256}
    result = RetrieveResult(body, per_query, evaluated, found, ks)
    if rerank is not None:
        from ..geometry.hubness import repaired_neighbours
        from ..geometry.retrieval import evaluate_run, retrieval_paired

        Q = np.asarray(q_src[:], dtype=np.float64)
        C = np.asarray(c_src[:], dtype=np.float64)
        rows, method = repaired_neighbours(Q, C, min(max(ks), n), rerank, in_corpus=False, seed=seed,
                                           ranks=ranks)  # the plain run's tie rule: a tie is not a change
        per_b = evaluate_run(rows, judged, ks, n_docs=n)
        result.paired = retrieval_paired(per_query, per_b, paired_metrics, resamples=resamples,
                                         permutations=resamples, seed=seed, margins={},
                                         against=f"--rerank {rerank}: {method}")
        body["paired"] = result.paired.to_dict()
    result.seconds = time.perf_counter() - t0
    files = {}
    if mteb_json is not None:
        from ..io.mteb import task_result_bytes

        files["mteb_json"] = task_result_bytes(body["metrics"], main_score=body["main_score"], task_name=task_name,
                                               dataset_revision=dataset_revision, split=split,
                                               evaluation_time=result.seconds,
                                               extra={"queries": body["queries"], "corpus": body["corpus"],
                                                      "tie_rule": body["tie_rule"]})
    return Outcome(body=body, files=files, result=result)


def _per_query_in_order(a: RetrieveResult, b: RetrieveResult) -> dict[str, np.ndarray]:
    """B's per-query values in the order of A's evaluated queries (paired by id)."""
    qa, qb = list(np.asarray(a.query_ids).tolist()), list(np.asarray(b.query_ids).tolist())
    if qa == qb:
        return dict(b.per_query)
    pos = {q: i for i, q in enumerate(qb)}
    missing = [q for q in qa if q not in pos]
    if missing or len(qa) != len(qb):
        raise InputError(f"against queries: {len(qa)} queries evaluated for A, {len(qb)} for B "
                         f"({len(missing)} of A's not among B's); a paired comparison needs the same queries")
    order = np.array([pos[q] for q in qa], dtype=np.int64)
    return {key: np.asarray(v)[order] for key, v in b.per_query.items()}


def pair(a: Outcome, b: Outcome, *, resamples: int, seed: int, margins: Optional[Mapping[str, float]],
         against: str, options: Mapping[str, Any]) -> Any:
    """``--against B_QUERIES B_CORPUS``: nDCG@10 (and every metric given a margin) of both runs on the
    same resampled queries (:func:`embedcheck.geometry.retrieval.retrieval_paired`)."""
    from ..geometry.retrieval import retrieval_paired

    if options["rerank"] is not None:
        raise InputError("rerank and against both name a B to compare with: give one")
    metrics, by_key = _paired_plan(a.result.ks, margins, options["resamples"])
    return retrieval_paired(a.result.per_query, _per_query_in_order(a.result, b.result), metrics,
                            resamples=options["resamples"], permutations=options["resamples"], seed=seed,
                            margins=by_key, against=" ".join(against.split(", ")))  # B's inputs, as it always named them


@dataclass
class RetrieveResult:
    """What Python reads off a ``retrieve`` report besides its keys (the report answers these
    attributes: :attr:`embedcheck.spec.Outcome.result`): ``metrics`` and every other key of the report
    body, ``metric("ndcg@10")``, and what stays off the JSON — ``per_query`` (metric → one value per
    evaluated query, for paired tests), ``query_ids`` (those queries' ids, bytes), ``run`` (the
    :class:`~embedcheck.geometry.retrieval.TopK` of every query row), ``seconds``, and ``paired``
    with ``rerank`` (the repaired run against plain cosine)."""

    body: dict[str, Any]
    per_query: dict[str, np.ndarray]
    query_ids: np.ndarray
    run: Any
    ks: list[int]
    seconds: float = 0.0
    paired: Any = None

    def __getattr__(self, name: str) -> Any:
        if name in _BODY:
            return (self.__dict__.get("body") or {}).get(name)
        raise AttributeError(name)

    def metric(self, name: str) -> float:
        """A metric by ``ndcg@10`` or ``ndcg_at_10``."""
        from ..geometry.retrieval import metric_key

        key = metric_key(name)
        if key not in self.body["metrics"]:
            raise InputError(f"no metric {name!r}; known: "
                             f"{', '.join(k for k in self.body['metrics'] if not k.endswith('_ci95'))}")
        return float(self.body["metrics"][key])


def view(report: dict[str, Any], title: str = "") -> list[Any]:
    """One row per metric family, one column per cut-off, then the main score with its interval and
    the counts (the JSON has every interval)."""
    from rich.table import Table

    from ..report.result import fmt_value

    m = report["metrics"]
    t = Table(title=title, header_style="bold")
    t.add_column("metric", style="cyan")
    for k in report["k"]:
        t.add_column(f"@{k}", justify="right", overflow="fold")
    for fam in ("ndcg", "map", "recall", "precision", "mrr"):
        t.add_row(fam, *[fmt_value(m[f"{fam}_at_{k}"]) for k in report["k"]])
    main = report["main_score"]
    ci = m.get(f"{main}_ci95")
    return [t, f"{main} = {fmt_value(m[main])}" + (f"  95% CI [{fmt_value(ci[0])}, {fmt_value(ci[1])}]" if ci else ""),
            f"queries {report['queries']} ({report['queries_without_relevant']} without a relevant document, "
            f"{report['queries_without_qrels']} without qrels), corpus {report['corpus']}, dim {report['dim']}"]


def title(args: Mapping[str, Any]) -> str:
    """The table's title: the queries' and the corpus's names (a file's name, a store's locator)."""
    from pathlib import Path

    from ..io.stores import display_name, is_store

    def shown(x: Any) -> str:
        return display_name(x) if is_store(x) else Path(x).name

    return f"retrieve — {shown(args['queries'])} over {shown(args['corpus'])}"


BODY_SCHEMA = obj({
    "queries": INT, "queries_without_relevant": INT, "queries_without_qrels": INT, "corpus": INT, "dim": INT,
    "judgements": INT, "k": {"type": "array", "items": INT, "minItems": 1}, "main_score": STR,
    "metrics": {"type": "object", "required": ["ndcg_at_10"],
                "patternProperties": {r"^(ndcg|map|recall|precision|mrr)_at_\d+$": NUM,
                                      r"^(ndcg|map|recall|precision|mrr)_at_\d+_ci95$": INTERVAL}},
    "ci_method": STR, "tie_rule": STR, "score": STR, "model": STR,
    "models": {"type": "object", "additionalProperties": STR},
}, optional=("ci_method", "model", "models"))
_BODY = tuple(BODY_SCHEMA["properties"]) + ("inputs",)

MEASUREMENT = Measurement(
    name="retrieve",
    help="exact search quality against relevance judgements: nDCG@10, MAP, recall",
    description=("Retrieval quality of precomputed vectors: nDCG, MAP, recall, P and MRR at each cut-off, "
                 "with 95% intervals over queries, exactly as MTEB's evaluator (trec_eval) computes them.\n\n"
                 "Every query is searched over all documents (exact, float32 cosine, in blocks); equal "
                 "scores are ordered as trec_eval orders them (document id descending).\n\n"
                 "With --against B_QUERIES --against B_CORPUS (another embedding of the same rows), 'paired' "
                 "compares nDCG@10 (and every metric given a --margin, e.g. recall@100=0.01) on the same "
                 "resampled queries.\n\n"
                 "Gates: --fail-below X (nDCG@10, a fraction), --fail-below METRIC=X (map@100, recall@1000 ...).\n\n"
                 "Example: embedcheck retrieve q.npy corpus.npy qrels.tsv --fail-below ndcg@10=0.6"),
    run=run,
    inputs=(Input("queries", help="Query " + _VECTORS),
            Input("corpus", help="Document " + _VECTORS),
            Input("qrels", "file", open=open_qrels,
                  help="Judgements: TSV query-id, corpus-id, score (header optional) or JSONL with those fields.")),
    options=(Option("k", int, K_VALUES, "Cut-offs, comma-separated (10 is always added: nDCG@10 is the main score).",
                    min=1, sep=","),
             Option("query_id_field", str, "id", "Sidecar field holding the query ids.", spelled="query-field"),
             Option("doc_id_field", str, "id", "Sidecar field holding the document ids.", spelled="doc-field"),
             Option("resamples", int, 1000, "Bootstrap resamples over queries of the 95% intervals; 0: none.", min=0),
             Option("rerank", str, None, "A hubness repair re-scoring the neighbours: 'paired' compares it (B) with "
                    "plain cosine (A) on the same queries.", choices=tuple(REPAIRS), show_default=False),
             Option("mteb_json", str, None, "Also write MTEB's result JSON (TaskResult layout; --task-name) to this file.",
                    metavar="PATH", show_default=False),
             Option("task_name", str, "Retrieval", "With --mteb-json: the MTEB task name (e.g. STSBenchmark, SciFact)."),
             Option("dataset_revision", str, "unknown", "With --mteb-json: the data set revision recorded.",
                    spelled="revision"),
             Option("split", str, "test", "With --mteb-json: the split the scores are filed under."),
             Option("query_ids", object, None, "The query rows' ids (one per row), where QUERIES is an array.",
                    api_only=True),
             Option("doc_ids", object, None, "The corpus rows' ids (one per row), where CORPUS is an array.",
                    api_only=True),
             Option("score", object, None, "A picklable f(Q, C) -> float32 (b, t) replacing the cosine.", api_only=True),
             Option("score_name", str, "cosine", "How the report names the score.", api_only=True)),
    figures=retrieval_figures(),
    figures_for=lambda options: retrieval_figures(sorted({*check_k_values(options["k"]), 10})),
    primary="metrics.ndcg_at_10",
    version=1,
    unit="queries",
    body_schema=BODY_SCHEMA,
    example=("retrieve_queries.npy", "retrieve_corpus.npy", "retrieve_qrels.tsv", "--resamples", "100"),
    writes=(Writes("mteb_json", "file"),),
    runs={"": ("retrieve_queries.npy", "retrieve_corpus.npy", "retrieve_qrels.tsv", "--resamples", "100",
               "--mteb-json", "mteb.json")},
    view=view,
    title=title,
    pair=pair,
)

__all__ = ["MEASUREMENT", "Judgements", "RetrieveResult", "open_qrels", "pair", "run", "view"]
