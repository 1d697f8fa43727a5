"""One self-contained HTML page for humans from a pipeline's output folder (``embedcheck report``).

Gathers every embedcheck report (``*.json`` whose ``schema`` is ``embedcheck.<command>/<version>``)
and every plot (``*.png``) under a folder, and the provenance sidecars (``*.meta.json``: model,
input hashes, package versions). The page has no external reference at all — styles inline,
images as ``data:image/png;base64`` URIs — so it opens from disk, offline, and can be uploaded
as one CI artifact. A map page ``embedcheck map`` wrote in the folder (``NAME.html`` beside its
``NAME.projection.npy``) is drawn again in a map section, with plotly's bundle inlined once.

Per report: its declared figures (:func:`embedcheck.report.schemas.figures_of`: headline figures in bold
with their better direction, context figures such as a threshold's cosine) with their 95 %
intervals, the chance level or floor each is read against and its one-line meaning — all from the
figure declarations, written once; a ``threshold`` report's chosen thresholds; the
gates passed and failed, the paired verdicts (``paired`` section), a ``--baseline``
comparison's significant drops, warnings and notes, and ``ci_method``. Every headline value
sits in a cell ``<td data-report="REL" data-figure="KEY" data-value="REPR">`` so a machine can
read the page back exactly.

>>> from pathlib import Path; import tempfile, json
>>> d = Path(tempfile.mkdtemp()); _ = (d / "a.json").write_text(json.dumps({"schema": "embedcheck.sts/1", "n": 3, "spearman": 80.5}))
>>> page, summary = build_report(d)
>>> summary["reports"], 'data-figure="spearman"' in page, "http" in page
(1, True, False)
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any, Optional

from ..errors import InputError
from ..io.jsonio import loads

#: the largest file read as a report or a plot (bigger ones are listed, not inlined)
MAX_JSON_BYTES = 50 << 20
MAX_PNG_BYTES = 20 << 20

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em auto;max-width:70em;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;margin-top:2em;border-bottom:1px solid #ccc}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f4f4f4}.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:600}.warn{color:#9a6700}
.better{color:#1a7f37;font-weight:600}.worse{color:#cf222e;font-weight:600}.muted{color:#666}
pre{background:#f6f8fa;padding:.6em;overflow-x:auto;font-size:.85em}img{max-width:100%;border:1px solid #eee}
nav ul{columns:2}.verdict{font-size:1.05em;padding:.4em .6em;background:#f6f8fa;border-left:4px solid #999}
.context td:first-child{color:#666}
"""


def _fmt(v: Any) -> str:
    """A number for people: four significant digits, thousands separated, small values in
    scientific notation; ``—`` for a missing value (never "None").

    >>> _fmt(0.012345), _fmt(None), _fmt(159600), _fmt(2.5e-05), _fmt(True)
    ('0.01235', '—', '159,600', '2.5e-05', 'yes')
    """
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if v == 0 or 1e-3 <= abs(v) < 1e5:
            return f"{v:.4g}"
        return f"{v:,.0f}" if abs(v) >= 1e5 else f"{v:.2g}"
    return str(v)


def _fmt_p(p: Any) -> str:
    """``p < 0.001`` below it, else three decimals; ``—`` when there is none.

    >>> _fmt_p(0.000999), _fmt_p(0.04), _fmt_p(None)
    ('< 0.001', '0.040', '—')
    """
    if p is None or isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p):
        return "—"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _plural(n: int, one: str, many: Optional[str] = None) -> str:
    """``1 gate``, ``2 gates``.

    >>> _plural(1, "gate failed", "gates failed"), _plural(3, "report")
    ('1 gate failed', '3 reports')
    """
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def _get(report: dict[str, Any], dotted: str) -> Any:
    """``report["a"]["b"]`` for ``"a.b"``; a key may itself hold dots (``paired["label_map.map"]``)."""
    cur: Any = report
    parts = dotted.split(".")
    i = 0
    while i < len(parts):
        if not isinstance(cur, dict):
            return None
        for j in range(len(parts), i, -1):  # the longest key that exists
            k = ".".join(parts[i:j])
            if k in cur:
                cur = cur[k]
                i = j
                break
        else:
            return None
    return cur


def _interval_of(report: dict[str, Any], command: str, key: str) -> Optional[list[float]]:
    from .schemas import figures_of

    fig = figures_of(command).get(key)
    ikey = fig.interval if fig is not None and fig.interval else key + "_ci95"
    v = _get(report, ikey)
    return v if isinstance(v, list) and len(v) == 2 else None


def gather(folder: Path) -> tuple[list[tuple[Path, dict[str, Any]]], list[Path], list[tuple[Path, dict[str, Any]]]]:
    """(reports, plots, provenance sidecars) under ``folder``, each sorted by relative path."""
    from .schemas import parse_schema_id

    reports, metas = [], []
    for p in sorted(folder.rglob("*.json")):
        if not p.is_file() or p.stat().st_size > MAX_JSON_BYTES:
            continue
        try:
            raw = p.read_bytes()
        except OSError:
            continue
        obj = loads(raw, str(p))  # a report cut short or not UTF-8 is refused, naming it
        if p.name.endswith(".meta.json") and isinstance(obj, dict):
            metas.append((p, obj))
        elif isinstance(obj, dict) and parse_schema_id(obj.get("schema")) is not None:
            reports.append((p, obj))
    plots = [p for p in sorted(folder.rglob("*.png")) if p.is_file()]
    return reports, plots, metas


def _rel(p: Path, folder: Path) -> str:
    try:
        return str(p.relative_to(folder))
    except ValueError:
        return p.name


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


#: a report's own verdicts (drift's ``verdict``) and how each reads: the class of its words on the page
VERDICT_CLASS = {"drift": "fail", "no-drift": "pass", "inconclusive": "warn", "underpowered": "warn",
                 "better": "pass", "worse": "fail", "equivalent": "pass", "non-inferior": "pass"}


def _gate_words(g: dict[str, Any]) -> str:
    """One gate in words, as the command printed it (``FAIL aag = 0.0129 (needs >= 0.05)``)."""
    from .gates import verdict_line as gate_line

    try:
        return gate_line(g)
    except (KeyError, TypeError, ValueError):  # a gate of another shape (a report from elsewhere)
        return f"{'PASS' if g.get('passed') else 'FAIL'} {g.get('name', '?')}"


def verdict_line(command: str, rep: dict[str, Any]) -> str:
    """The report's verdict in one line of words: its own verdict (drift: ``underpowered`` shown as
    such), every gate as the command printed it, every paired verdict; or that nothing was gated."""
    parts: list[str] = []
    own = rep.get("verdict")
    if isinstance(own, str):
        parts.append(f'<span class="{VERDICT_CLASS.get(own, "muted")}">{_e(command)} verdict: <b>{_e(own)}</b></span>')
    for g in rep.get("gates") or []:
        if isinstance(g, dict):
            parts.append(f'<span class="{"pass" if g.get("passed") else "fail"}">{_e(_gate_words(g))}</span>')
    paired = rep.get("paired")
    if isinstance(paired, dict):
        calls = [f'<span class="{VERDICT_CLASS.get(str(f["verdict"]), "muted")}">{_e(k)} {_e(f["verdict"])}</span>'
                 for k, f in paired.items() if isinstance(f, dict) and "verdict" in f]
        if calls:
            parts.append(f"against {_e(paired.get('against', 'B'))}: " + ", ".join(calls))
    if not parts:
        parts.append('<span class="muted">no gate set: the figures below, not a verdict</span>')
    return f'<p class="verdict" data-verdict="{_e(rep.get("verdict", ""))}">' + " · ".join(parts) + "</p>"


#: the report keys that say what was measured: models, stores and indexes, their settings, sources
CONTEXT_KEYS = ("model", "models", "index", "kind", "library", "metric", "store", "source", "query_source", "queries_source",
                "ref", "cur", "settings", "engine", "seed")


def _context(rep: dict[str, Any]) -> str:
    """What the report measured, as it says: the models, stores, index and its settings, sources
    and the content hashes of its inputs; empty when it carries none of them."""
    rows: list[tuple[str, str]] = []

    def walk(prefix: str, v: Any) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                walk(f"{prefix}.{k}", x)
        elif isinstance(v, (str, int, float)) and not isinstance(v, bool):
            rows.append((prefix, str(v)))

    for k in CONTEXT_KEYS:
        if k in rep:
            v = rep[k]
            if k in ("ref", "cur") and isinstance(v, dict):
                v = {kk: vv for kk, vv in v.items() if kk in ("source", "model", "store", "n")}
            walk(k, v)
    inputs = rep.get("inputs")
    if isinstance(inputs, dict):
        walk("inputs", inputs)
    if not rows:
        return ""
    return ('<table class="context"><tr><th>measured on</th><th></th></tr>'
            + "".join(f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rows) + "</table>")


def _report_section(rel: str, rep: dict[str, Any], plots: tuple[str, ...] = ()) -> tuple[str, dict[str, Any]]:
    from .schemas import parse_schema_id

    command, version = parse_schema_id(rep.get("schema")) or ("?", 0)
    out = [f'<section id="{_e(rel)}"><h2>{_e(rel)} <span class="muted">({_e(rep["schema"])})</span></h2>',
           verdict_line(command, rep), _context(rep)]
    from .schemas import figures_of

    rows = []
    for key, fig in figures_of(command).items():
        v = _get(rep, key)
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        ci = _interval_of(rep, command, key)
        ci_s = f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else '<span class="muted">no interval</span>'
        ref = _get(rep, fig.reference) if fig.reference else None
        ref_s = (f'{_e(_fmt(ref))} <span class="muted">({_e(fig.reference)})</span>'
                 if isinstance(ref, (int, float)) and not isinstance(ref, bool) else "")
        direction = f"{fig.better} is better" if fig.headline else '<span class="muted">context</span>'
        name = f"<b>{_e(key)}</b>" if fig.headline else _e(key)
        rows.append(f'<tr><td>{name}</td><td class="num" data-report="{_e(rel)}" data-figure="{_e(key)}" '
                    f'data-value="{_e(repr(float(v)))}">{_e(_fmt(v))}</td><td class="num">{ci_s}</td>'
                    f'<td class="num">{ref_s}</td><td>{direction}</td><td class="muted">{_e(fig.help)}</td></tr>')
    if rows:
        out.append("<h3>Figures</h3><table><tr><th>figure</th><th>value</th><th>95% interval</th>"
                   "<th>chance level / floor</th><th>direction</th><th>what it means</th></tr>" + "".join(rows) + "</table>")
    if command == "threshold":
        out.append(_thresholds(rep))
    gates = [g for g in rep.get("gates") or [] if isinstance(g, dict)]
    failed = [g for g in gates if not g.get("passed")]
    paired = rep.get("paired")
    verdicts: dict[str, str] = {}
    if isinstance(paired, dict):
        prow = []
        for k, f in paired.items():
            if not isinstance(f, dict) or "verdict" not in f:
                continue
            verdicts[k] = str(f["verdict"])
            ci = f.get("difference_ci95")
            prow.append(
                f"<tr><td>{_e(k)}</td><td class=num>{_e(_fmt(f.get('a')))}</td><td class=num>{_e(_fmt(f.get('b')))}</td>"
                f"<td class=num>{_e(_fmt(f.get('difference')))}</td>"
                f"<td class=num>{_e(f'[{_fmt(ci[0])}, {_fmt(ci[1])}]' if isinstance(ci, list) else 'none')}</td>"
                f"<td class=num>{_e(_fmt_p(f.get('p_value')))}</td><td class=num>{_e(_fmt(f.get('min_detectable_effect')))}</td>"
                f"<td class=num>{_e(_fmt(f.get('margin')))}</td>"
                f'<td class="{_e(f["verdict"])}">{_e(f["verdict"])}</td></tr>')
        if prow:
            against = f' against {_e(paired["against"])}' if paired.get("against") else ""
            out.append(f"<h3>Paired comparison{against}</h3><table><tr><th>figure</th><th>A</th><th>B</th>"
                       "<th>difference (positive: better)</th><th>95% interval</th><th>p</th><th>min. detectable</th>"
                       "<th>margin</th><th>verdict</th></tr>" + "".join(prow) + "</table>")
            if paired.get("ci_method"):
                out.append(f'<p class="muted">{_e(paired["ci_method"])}</p>')
    if command == "compare" and isinstance(rep.get("figures"), list):
        crow = []
        for f in rep["figures"]:
            if not isinstance(f, dict) or not f.get("headline"):
                continue
            ci = f.get("difference_ci95")
            mark = ("worse" if f.get("drop", 0) > 0 else "better") if f.get("beyond_noise") else f.get("noise", "")
            crow.append(f"<tr><td>{_e(f.get('figure'))}</td><td class=num>{_e(_fmt(f.get('baseline')))}</td>"
                        f"<td class=num>{_e(_fmt(f.get('current')))}</td><td class=num>{_e(_fmt(f.get('difference')))}</td>"
                        f"<td class=num>{_e(f'[{_fmt(ci[0])}, {_fmt(ci[1])}]' if isinstance(ci, list) else '-')}</td>"
                        f'<td class="{_e(mark)}">{_e(mark if f.get("beyond_noise") else "within noise" if ci else mark)}</td></tr>')
        if crow:
            out.append(f"<h3>{_e(rep.get('command', ''))}: {_e(rep.get('baseline', ''))} → {_e(rep.get('current', ''))}"
                       "</h3><table><tr><th>headline figure</th><th>baseline</th><th>current</th><th>difference</th>"
                       "<th>95% interval (runs independent)</th><th>call</th></tr>" + "".join(crow) + "</table>")
    cmp = rep.get("comparison")
    if isinstance(cmp, dict):
        drops = cmp.get("significant_drops") or []
        out.append(f"<h3>Against the baseline {_e(cmp.get('baseline', ''))}</h3><p>"
                   + (f'<span class="fail">significant drops: {_e(", ".join(drops))}</span>' if drops
                      else '<span class="pass">no headline figure dropped beyond noise</span>') + "</p>")
        if cmp.get("pairing"):
            out.append(f'<p class="warn">{_e(cmp["pairing"])}</p>')
    notes = [(k, rep[k]) for k in ("warning", "warnings", "note", "reading", "pairing") if rep.get(k)]
    for k, v in notes:
        vals = v if isinstance(v, list) else [v]
        for x in vals:
            out.append(f'<p class="{"warn" if k.startswith("warn") else "muted"}"><b>{_e(k)}:</b> {_e(x)}</p>')
    if rep.get("ci_method"):
        out.append(f'<p class="muted">intervals: {_e(rep["ci_method"])}</p>')
    for plot in plots:
        out.append(plot)
    out.append("</section>")
    return "".join(out), {"command": command, "gates_failed": [g.get("name") for g in failed],
                          "verdicts": verdicts}


def _thresholds(rep: dict[str, Any]) -> str:
    """The chosen thresholds of a ``threshold`` report with their precision, recall and intervals."""
    names = {"at_precision": "at the target precision", "best_f1": "at best F1", "check": "checked (--check)"}

    def cell(pt: dict[str, Any], key: str) -> str:
        v, ci = pt.get(key), pt.get(f"{key}_ci95")
        extra = f' <span class="muted">[{_fmt(ci[0])}, {_fmt(ci[1])}]</span>' if isinstance(ci, list) and len(ci) == 2 else ""
        return f'<td class="num">{_e(_fmt(v))}{extra}</td>'

    rows = []
    for k, label in names.items():
        pt = rep.get(k)
        if not isinstance(pt, dict):
            continue
        if k == "at_precision" and pt.get("target_precision") is not None:
            label = f"at precision {_fmt(pt['target_precision'])}"
        rows.append(f"<tr><td>{_e(label)}</td>" + "".join(cell(pt, x) for x in ("threshold", "precision", "recall", "f1"))
                    + f'<td class="num">{_e(_fmt(pt.get("floor_percentile")))}</td></tr>')
    if not rows:
        return ""
    return ("<h3>Thresholds</h3><p class=\"muted\">A pair is a match when its cosine is at or above the threshold; "
            "95% intervals in brackets; the floor percentile is the share of unrelated pairs scoring below it.</p>"
            "<table><tr><th>threshold</th><th>cosine</th><th>precision</th><th>recall</th><th>F1</th>"
            "<th>floor percentile</th></tr>" + "".join(rows) + "</table>")


def _provenance(metas: list[tuple[Path, dict[str, Any]]], folder: Path) -> str:
    if not metas:
        return ""
    rows = []
    for p, m in metas:
        model = m.get("model")
        if isinstance(model, dict):
            model = model.get("name") or model.get("id") or model.get("path")
        hashes = []

        def walk(o: Any) -> None:
            if isinstance(o, dict):
                for k, v in o.items():
                    if (k == "sha256" or str(k).endswith("_sha256")) and isinstance(v, str):
                        hashes.append(v[:12])
                    else:
                        walk(v)
            elif isinstance(o, list):
                for x in o:
                    walk(x)

        walk(m.get("inputs"))
        versions = m.get("versions") or m.get("packages") or {}
        vs = ", ".join(f"{k} {v}" for k, v in versions.items()) if isinstance(versions, dict) else str(versions)
        rows.append(f"<tr><td>{_e(_rel(p, folder))}</td><td>{_e(m.get('command', ''))}</td><td>{_e(model or '')}</td>"
                    f"<td>{_e(', '.join(hashes[:4]))}</td><td>{_e(vs)}</td></tr>")
    return ("<h2>Provenance</h2><table><tr><th>sidecar</th><th>command</th><th>model</th><th>input sha256</th>"
            "<th>versions</th></tr>" + "".join(rows) + "</table>")


def _plots_of(reports: list[tuple[Path, dict[str, Any]]], plots: list[Path]) -> dict[Path, list[Path]]:
    """Each report's plots: the file its ``plot`` key names, or a plot of the same stem beside it."""
    out: dict[Path, list[Path]] = {}
    by_path = {q.resolve(): q for q in plots}
    for p, rep in reports:
        named = rep.get("plot")
        cands = []
        if isinstance(named, str):
            for base in (p.parent, Path.cwd()):
                q = (base / named).resolve()
                if q in by_path:
                    cands.append(by_path[q])
                    break
        same = p.with_suffix(".png").resolve()
        if same in by_path and by_path[same] not in cands:
            cands.append(by_path[same])
        if cands:
            out[p] = cands
    return out


def _figure(p: Path, folder: Path) -> str:
    rel = _rel(p, folder)
    if p.stat().st_size > MAX_PNG_BYTES:
        return f"<figure><figcaption>{_e(rel)} (too large to inline)</figcaption></figure>"
    data = base64.b64encode(p.read_bytes()).decode("ascii")
    return f'<figure><img alt="{_e(rel)}" src="data:image/png;base64,{data}"><figcaption>{_e(rel)}</figcaption></figure>'


#: the largest map page read for its data (bigger ones are not embedded)
MAX_MAP_BYTES = 200 << 20


def _maps(folder: Path) -> str:
    """The map sections: every page ``embedcheck map`` wrote under ``folder`` (``NAME.html`` with its
    ``NAME.projection.npy`` beside it) drawn again here from its own data — the same scatter,
    colourings, hover and search — with plotly's bundle inlined once (no request leaves the page).
    Empty when the folder holds no map, or plotly is not installed (then a line says so)."""
    from . import mappage

    found = []
    for p in sorted(folder.rglob("*.html")):
        if not p.is_file() or not p.with_name(p.stem + ".projection.npy").is_file() or p.stat().st_size > MAX_MAP_BYTES:
            continue
        data = mappage.data_of(p.read_text(encoding="utf-8", errors="replace"))
        if data is not None:
            found.append((p, data))
    if not found:
        return ""
    try:
        js = mappage.require_plotly()
    except InputError:
        return ("<h2>Maps</h2><p class=\"muted\">" + _e(", ".join(_rel(p, folder) for p, _ in found))
                + ": not drawn here (plotly is not installed: pip install 'embedcheck[map]')</p>")
    secs = []
    for k, (p, data) in enumerate(found, 1):
        secs.append(f'<h3 id="map:{_e(_rel(p, folder))}">{_e(_rel(p, folder))}</h3>' + mappage.section(data, suffix=f"-{k}"))
    inits = "".join(f'embedcheckMapInit("-{k}");' for k in range(1, len(found) + 1))
    return (f"<h2>Maps</h2><style>{mappage.CSS}</style>" + "".join(secs)
            + f"<script>{mappage.inline_js(js)}</script><script>{mappage.SCRIPT}\n{inits}</script>")


def build_report(folder: Any, *, title: Optional[str] = None) -> tuple[str, dict[str, Any]]:
    """(HTML page, summary) of every report and plot under ``folder``; an InputError when the folder
    does not exist or holds neither."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"folder {folder} does not exist or is not a folder")
    reports, plots, metas = gather(folder)
    maps = _maps(folder)
    if not reports and not plots and not maps:
        raise InputError(f"folder {folder} holds no embedcheck report (*.json with an embedcheck schema) and no plot (*.png)")
    title = title or f"embedcheck: {folder.resolve().name}"
    body, summary_reports = [], []
    owned = _plots_of(reports, plots)
    for p, rep in reports:
        rel = _rel(p, folder)
        sec, info = _report_section(rel, rep, tuple(_figure(q, folder) for q in owned.get(p, [])))
        body.append(sec)
        summary_reports.append({"path": rel, **info})
    figs = []
    mine = {q for qs in owned.values() for q in qs}
    for p in (q for q in plots if q not in mine):
        figs.append(_figure(p, folder))
    failed = [f"{r['path']}: {g}" for r in summary_reports for g in r["gates_failed"]]
    nav = "".join(f'<li><a href="#{_e(r["path"])}">{_e(r["path"])}</a> ({_e(r["command"])})</li>' for r in summary_reports)
    head = (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
            f"<style>{_CSS}</style></head><body><h1>{_e(title)}</h1>"
            f"<p>{_plural(len(reports), 'report')}, {_plural(len(plots), 'plot')}. "
            + (f'<span class="fail">{_plural(len(failed), "gate failed", "gates failed")}: {_e("; ".join(failed))}</span>'
               if failed
               else '<span class="pass">every gate passed</span>') + "</p>"
            + (f"<nav><ul>{nav}</ul></nav>" if nav else ""))
    page = head + "".join(body) + maps + (("<h2>Plots</h2>" + "".join(figs)) if figs else "") \
        + _provenance(metas, folder) + "</body></html>\n"
    summary = {"folder": str(folder), "reports": len(reports), "plots": len(plots), "gates_failed": failed,
               "commands": sorted({r["command"] for r in summary_reports}),
               "verdicts": {r["path"]: r["verdicts"] for r in summary_reports if r["verdicts"]}}
    return page, summary


__all__ = ["build_report", "gather"]
