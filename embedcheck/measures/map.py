"""``map``: every row a point on a 2-D map of the space (a seeded UMAP, or PCA), in one offline HTML
page coloured by label, by each issue column, by cluster or by any field of the rows; the projection
saved beside the page as an ``.npy`` and reusable (``--projection``), a static PNG (``--png``) and a
parquet file for Embedding Atlas (``--export-atlas``). The report says how well the map keeps each
row's neighbours (trustworthiness). The maths: :mod:`embedcheck.geometry.projection`; the page:
:mod:`embedcheck.report.mappage`."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, Optional

import numpy as np

from ..errors import InputError
from ..report.result import Figure
from ..report.schemas import FRACTION
from ..spec import Measurement, Option, Outcome, Writes

#: rows a page draws before it shows a seeded sample (that keeps every flagged row)
MAX_POINTS = 100_000
#: characters of text a page keeps in all (a page of many rows trims each text shorter: 60 at 100,000 rows)
TEXT_BUDGET = 6_000_000
#: the fields of a rows file or sidecar that are not colourings (they are shown otherwise)
NOT_COLOURS = ("id", "text", "row", "projection_x", "projection_y")


def projection_path(output: Any) -> Path:
    """Where the projection of the page ``output`` is saved: ``map.html`` → ``map.projection.npy``."""
    p = Path(os.fspath(output))
    return p.with_name(p.stem + ".projection.npy")


def same_file(a: Any, b: Any) -> bool:
    pa, pb = Path(os.fspath(a)), Path(os.fspath(b))
    if os.path.realpath(pa) == os.path.realpath(pb):
        return True
    try:
        return pa.exists() and pb.exists() and os.path.samefile(pa, pb)
    except OSError:
        return False


def _check_paths(output: Optional[str], png: Optional[str], export_atlas: Optional[str]) -> None:
    if output is not None and Path(output).suffix.lower() not in (".html", ".htm"):
        raise InputError(f"output {output}: the map is one HTML page; name it .html")
    if png is not None and Path(png).suffix.lower() != ".png":
        raise InputError(f"png {png}: name the picture .png")
    if export_atlas is not None and Path(export_atlas).suffix.lower() != ".parquet":
        raise InputError(f"export_atlas {export_atlas}: Embedding Atlas reads a .parquet file; name it .parquet")


def _load_projection(path: str, n: int) -> np.ndarray:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"projection {path}: no such file")
    try:
        Y = np.load(p, allow_pickle=False, mmap_mode=None)
    except Exception:  # noqa: BLE001 - numpy's words are its internals
        raise InputError(f"projection {path}: not a readable .npy file") from None
    if Y.ndim != 2 or Y.shape[1] != 2 or Y.dtype.kind not in "fiu":
        raise InputError(f"projection {path}: a map's projection is an (n, 2) array of numbers, got shape {Y.shape}")
    if Y.shape[0] != n:
        raise InputError(f"projection {path}: {Y.shape[0]} rows, the embeddings have {n}")
    Y = np.ascontiguousarray(Y, dtype=np.float32)
    if not np.isfinite(Y).all():
        raise InputError(f"projection {path}: row {int(np.flatnonzero(~np.isfinite(Y).all(axis=1))[0])} is not finite")
    return Y


def _rows_columns(path: str, ids: Optional[list[Any]], n: int) -> dict[str, list[Any]]:
    """The columns of ``--rows`` (a table: .jsonl, .parquet, .csv, .tsv), one value per row of the
    embeddings: matched by id when both carry ids, else by position."""
    from ..io.tables import read_table

    recs = read_table(path, "rows")
    if len(recs) != n and (ids is None or not recs or "id" not in recs[0]):
        raise InputError(f"rows {path}: {len(recs)} rows, the embeddings have {n} (and no ids to match them by)")
    names = list(dict.fromkeys(k for r in recs for k in r))
    if ids is not None and "id" in names:
        key = {str(r.get("id")): r for r in recs}
        missing = [i for i in ids if str(i) not in key]
        if missing:
            raise InputError(f"rows {path}: no row has id {missing[0]!r} ({len(missing)} of the embeddings' ids missing)")
        recs = [key[str(i)] for i in ids]
    return {k: [r.get(k) for r in recs] for k in names}


def _sidecar_columns(src: Any) -> dict[str, list[Any]]:
    """Every per-row field of the input (its sidecar or store columns), by name."""
    out: dict[str, list[Any]] = {}
    for k in src.fields():
        col = src.column(k)
        if col is not None:
            out[k] = col
    return out


def _cluster_keywords(field: Any, values: list[Any], texts: list[Any]) -> None:
    """Each cluster's keywords on ``field`` (the ``cluster`` colouring), by the audit's own class-based
    TF-IDF (:func:`embedcheck.geometry.audit.ctfidf_keywords`) over the texts of the rows with a cluster:
    the same rows give the audit's slices' keywords. Clusters that are not whole numbers: none."""
    from ..geometry.audit import ctfidf_keywords

    rows, codes = [], []
    for r, v in enumerate(values):
        if v is None or isinstance(v, (bool, np.bool_)):
            continue
        try:
            c = float(v)
        except (TypeError, ValueError):
            return
        if not c.is_integer() or c < 0:
            return
        rows.append(r)
        codes.append(int(c))
    if not rows:
        return
    kw = ctfidf_keywords(["" if texts[r] is None else str(texts[r]) for r in rows], np.array(codes), max(codes) + 1)
    field.keywords = [kw[int(c)] if c not in ("(none)", "other") else [] for c in field.categories]


def _png(Y: np.ndarray, field: Any, flagged: Optional[np.ndarray], title: str) -> bytes:
    from ..geometry.plots import png_bytes, require_matplotlib

    plt = require_matplotlib("--png")
    fig, ax = plt.subplots(figsize=(7.5, 6))
    counts = field.counts()
    for c, name in enumerate(field.categories):
        rows = np.flatnonzero(field.codes == c)
        if len(rows):
            ax.scatter(Y[rows, 0], Y[rows, 1], s=5 if len(Y) > 5000 else 9, c=field.colours[c], alpha=0.8,
                       linewidths=0, label=f"{name} ({counts[c]})", rasterized=True)
    if flagged is not None and flagged.any():
        ax.scatter(Y[flagged, 0], Y[flagged, 1], s=40, facecolors="none", edgecolors="black", linewidths=0.8,
                   label=f"flagged ({int(flagged.sum())})")
    ax.set_title(title, fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(title=field.name, fontsize=8, markerscale=2, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    data = png_bytes(fig)
    plt.close(fig)
    return data


def _atlas(Y: np.ndarray, ids: list[Any], texts: Optional[list[Any]], columns: dict[str, list[Any]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols: dict[str, Any] = {"projection_x": pa.array(Y[:, 0], pa.float32()), "projection_y": pa.array(Y[:, 1], pa.float32()),
                            "id": pa.array([str(i) for i in ids], pa.string()),
                            "text": pa.array([None if t is None else str(t) for t in texts] if texts is not None
                                             else [None] * len(ids), pa.string())}
    for k, v in columns.items():
        if k in cols:
            continue
        try:
            cols[k] = pa.array(v)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            cols[k] = pa.array([None if x is None else str(x) for x in v], pa.string())
    buf = io.BytesIO()
    pq.write_table(pa.table(cols), buf, compression="zstd")
    return buf.getvalue()


def run(inputs: dict[str, Any], *, engine: Any, seed: int, output: Optional[str], method: str, projection: Optional[str],
        labels: Optional[str], rows: Optional[str], color: Optional[str], max_points: int, text_chars: int, neighbors: int,
        trust_rows: int, png: Optional[str], export_atlas: Optional[str]) -> Outcome:
    from ..geometry import projection as P
    from ..report import mappage as M

    src = inputs["embeddings"]
    n = src.n
    _check_paths(output, png, export_atlas)
    if n < 2:
        raise InputError(f"embeddings {src.name}: {n} rows; a map needs at least 2")
    if output is not None:
        M.require_plotly()  # before the work: the page cannot be written without it
    if method == "auto":
        method = "umap" if P.umap_available() else "pca"
        if method == "pca" and projection is None:
            from ..io.rowids import notice

            notice("umap-learn is not installed (pip install 'embedcheck[map]'): the map is PCA's")
    elif method == "umap" and projection is None and not P.umap_available():
        raise InputError("method umap needs umap-learn: pip install 'embedcheck[map]'")
    ids = src.unique_ids("embeddings")
    ids = ids if ids is not None else list(range(n))
    texts = src.texts()
    recorded: Optional[dict[str, Any]] = None
    columns = {k: v for k, v in _sidecar_columns(src).items() if k not in ("id", "text")}
    if labels is not None:
        from ..io.labels import labels_for
        from ..rows import content_sha256

        part = src.parts[0]
        where = part.store or (src.name if part.array is None else None)
        matched: dict[str, str] = {}
        y = labels_for(labels, n, "label", what="--labels", rows=where, matched=matched)
        columns["label"] = [v.item() if hasattr(v, "item") else v for v in y]
        recorded = {"labels_sha256": content_sha256(y), "rows_matched_by": matched}
    if rows is not None:
        extra = _rows_columns(rows, src.ids(), n)
        if texts is None and "text" in extra:
            texts = extra["text"]
        columns.update({k: v for k, v in extra.items() if k not in ("id", "text")})
    colour_names = [k for k in columns if k not in NOT_COLOURS and not M.is_score(columns[k])
                    and any(v is not None for v in columns[k])]
    scores = {k: columns[k] for k in columns if k not in NOT_COLOURS and M.is_score(columns[k])}
    if color is not None and (color not in columns or all(v is None for v in columns[color])):
        have = ", ".join(k for k in columns if k not in NOT_COLOURS) or "none"
        raise InputError(f"color {color!r}: no row has that field (the rows' fields: {have})")
    if color is not None and color not in colour_names:
        colour_names.append(color)
    # the label first, then the issues, then the rest in the order found
    ordered = (["label"] if "label" in colour_names else []) + [k for k in colour_names if k != "label" and M.is_issue(columns[k])] \
        + [k for k in colour_names if k != "label" and not M.is_issue(columns[k])]
    fields = [M.field_of(k, columns[k], "label" if k == "label" else "") for k in ordered]
    if not fields:
        fields = [M.Field("rows", "category", np.zeros(n, np.int32), ["every row"], [M.PALETTE[0]])]
    if texts is not None:
        for f in fields:
            if f.name == "cluster":
                _cluster_keywords(f, columns["cluster"], texts)
    default = color or fields[0].name
    issues = [f for f in fields if f.kind == "issue"]
    flagged = np.zeros(n, bool)
    for f in issues:
        if "yes" in f.categories:
            flagged |= f.codes == f.categories.index("yes")

    X = np.asarray(src[:], dtype=np.float32)
    if projection is not None:
        Y = _load_projection(projection, n)
        how = f"read from {Path(projection).name}"
        method_used = "given"
    else:
        Y, how = P.project(X, method, seed=seed, n_neighbors=neighbors)
        method_used = method
    t = P.trust(X, Y, seed=seed, rows=trust_rows)
    shown = P.sample_rows(n, max_points, flagged if flagged.any() else None, seed)
    chars = min(text_chars, max(24, TEXT_BUDGET // max(len(shown), 1)))
    body: dict[str, Any] = {
        "n": n, "dim": src.dim, "method": method_used, "projection": how,
        "trustworthiness": t["trustworthiness"], "trustworthiness_k": t["k"], "trustworthiness_rows": t["rows"],
        "shown": int(len(shown)), "sampled": bool(len(shown) < n), "max_points": max_points,
        "colourings": [f.name for f in fields], "color": default, "flagged": int(flagged.sum()),
        "texts": texts is not None, "text_chars": chars if texts is not None else None,
        "trust_method": (f"sklearn.manifold.trustworthiness, {t['k']} neighbours, cosine distance in the space, "
                         f"Euclidean on the map, over {t['rows']} rows" + (f" (a seeded sample of {n}, seed {seed})"
                                                                           if t["rows"] < n else "")),
    }
    if recorded is not None:
        body["inputs"] = recorded  # as every command that reads labels: compare tells two reports of the same rows
    files: dict[str, Any] = {}
    title = f"{Path(src.name).name} — {n:,} rows"
    if output is not None:
        note = f"{how}; trustworthiness {t['trustworthiness']:.3f} (k={t['k']})" if t["trustworthiness"] is not None else how
        page = M.page(Y, shown=shown, total=n, ids=ids, texts=texts, fields=fields, default=default, scores=scores,
                      title=title, note=note, text_chars=chars)
        parts = {str(output): page}
        npy = projection_path(output)
        if projection is None or not same_file(projection, npy):
            buf = io.BytesIO()
            np.save(buf, Y, allow_pickle=False)
            parts[str(npy)] = buf.getvalue()
        files["output"] = parts
    if png is not None:
        field = next(f for f in fields if f.name == default)
        files["png"] = _png(Y, field, flagged if flagged.any() and field.kind != "issue" else None,
                            f"{title}, coloured by {field.name}")
    if export_atlas is not None:
        files["export_atlas"] = _atlas(Y, ids, texts, {k: columns[k] for k in columns if k not in NOT_COLOURS})
    return Outcome(body=body, files=files)


MEASUREMENT = Measurement(
    name="map",
    help="look at the rows: a 2-D map (UMAP or PCA) in one offline HTML page, coloured by label, issue or field",
    description=("Every row a point on a 2-D projection — UMAP (umap-learn, seeded) or PCA — in one self-contained "
                 "HTML page (plotly inlined: no request leaves it): colour by label, by each issue column, by cluster "
                 "or by any field of the rows (a dropdown switches), hover for the id, label, text and scores, a "
                 "search box over texts and ids, a legend with counts (click to hide). The projection is saved "
                 "beside the page (map.projection.npy) and reused with --projection; --png writes a picture, "
                 "--export-atlas a parquet file Embedding Atlas opens. Above --max-points rows the page shows a "
                 "seeded sample that keeps every flagged row. The report's figure: how well the map keeps each "
                 "row's neighbours (trustworthiness).\n\n"
                 "Example: embedcheck map tweets.npy --rows audit_rows.jsonl -o map.html"),
    run=run,
    options=(Option("output", str, None, "Write the map page here (.html); its projection is saved beside it "
                    "(NAME.projection.npy).", aliases=("-o",), metavar="FILE.html", show_default=False),
             Option("method", str, "auto", "The projection: umap (umap-learn, seeded) or pca (fast, no draw); auto: "
                    "umap when umap-learn is installed, else pca.", choices=("auto", "umap", "pca")),
             Option("projection", str, None, "Reuse a saved projection (an (n, 2) .npy of these rows) instead of "
                    "projecting.", metavar="FILE.npy", show_default=False),
             Option("labels", str, None, "Labels of the rows (a file or table with ids, its 'label' column); default: "
                    "the rows' own 'label' field.", metavar="FILE", show_default=False),
             Option("rows", str, None, "More per-row columns (.jsonl, .parquet, .csv; matched by id), e.g. an audit's "
                    "rows file: a column of booleans is an issue colouring, any other a colouring, numbers with many "
                    "values are shown on hover.", metavar="FILE", show_default=False),
             Option("color", str, None, "The field coloured first (default: the label, else the first issue).",
                    metavar="FIELD", show_default=False),
             Option("max_points", int, MAX_POINTS, "Rows the page draws; above, a seeded sample that keeps every "
                    "flagged row.", min=1),
             Option("text_chars", int, 100, "Characters of each row's text the page keeps (fewer on a page of more than "
                    "60,000 rows: 6 million characters in all).", min=0),
             Option("neighbors", int, 15, "UMAP's neighbours.", min=2),
             Option("trust_rows", int, 2000, "Rows the trustworthiness is measured on (a seeded sample above).", min=10),
             Option("png", str, None, "Also write a static picture of the map (.png; needs matplotlib).",
                    metavar="FILE.png", show_default=False),
             Option("export_atlas", str, None, "Also write the rows for Embedding Atlas (.parquet: projection_x, "
                    "projection_y, id, text, label and the other columns).", metavar="FILE.parquet", show_default=False)),
    figures={
        "trustworthiness": Figure("higher", unit=FRACTION, range=(0, 1),
                                  help="how well the map keeps each row's nearest neighbours (1: all kept)"),
    },
    primary="trustworthiness",
    paired=False,
    tolerance=1e-6,
    writes=(Writes("output", "map"), Writes("png", "file"), Writes("export_atlas", "file")),
    runs={"": ("topics.npy", "--labels", "topics.labels.jsonl", "--method", "pca", "-o", "m.html")},
    example=("topics.npy", "--labels", "topics.labels.jsonl", "--method", "pca"),
)

__all__ = ["MAX_POINTS", "MEASUREMENT", "projection_path", "run"]
