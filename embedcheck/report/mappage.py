"""The map page: one self-contained HTML file of the rows as points (plotly's ``scattergl``, its
bundle read from the installed ``plotly`` package and inlined: the page makes no request), coloured by
any of the rows' fields — the label, each issue column, the cluster, any sidecar field — with a
dropdown that switches the colouring, a legend with counts (clicking an entry hides its points),
hover with the row's id, label, text (trimmed) and scores, a search box over the texts and ids that
rings the matches, zoom and pan.

Same data, same bytes: the page holds no time, no random id (the plot's element is ``map``), and its
data is written with sorted keys; the coordinates travel as little-endian float32 in base64.

The fields a map colours by (:class:`Field`) are made by :func:`fields_of` from columns of values:
a column of booleans is an *issue* (flagged rows red), any other a category (a numeric column with
many values is cut into five quantile bins; a column with more than :data:`MAX_CATEGORIES` values
keeps the most frequent and calls the rest ``other``).
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from ..errors import InputError

#: categories a colouring shows before the rest are called "other"
MAX_CATEGORIES = 24
#: the colours of categories (Tableau 10, then its light tones, then more), in order of frequency
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#bab0ac", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173")
FLAGGED, UNFLAGGED, MISSING = "#d62728", "#c7c7c7", "#999999"
#: the page's plot element (fixed: the same inputs give the same bytes)
DIV_ID = "map"


@dataclass
class Field:
    """One colouring: a name, what it is (``label``, ``issue``, ``category``), each row's category
    code and the categories' names and colours (code order)."""

    name: str
    kind: str
    codes: np.ndarray
    categories: list[str]
    colours: list[str]
    #: each category's keywords (the ``cluster`` colouring of rows with texts), code order; None: no keywords
    keywords: Optional[list[list[str]]] = None

    def counts(self) -> list[int]:
        return np.bincount(self.codes, minlength=len(self.categories)).astype(int).tolist()


def require_plotly() -> str:
    """The text of plotly.js as the installed ``plotly`` package ships it (``plotly.min.js``)."""
    try:
        import plotly
    except ImportError:
        raise InputError("output: the HTML map needs plotly: pip install 'embedcheck[map]'") from None
    js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    if not js.is_file():
        raise InputError(f"output: the installed plotly has no {js.name} to inline: pip install 'embedcheck[map]'")
    return js.read_text(encoding="utf-8")


def _is_bool(v: Any) -> bool:
    return isinstance(v, (bool, np.bool_))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not _is_bool(v)


def _word(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "(none)"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def is_issue(values: Sequence[Any]) -> bool:
    """A column of booleans (None allowed), at least one of them set: an issue colouring."""
    seen = [v for v in values if v is not None]
    return bool(seen) and all(_is_bool(v) for v in seen)


def is_score(values: Sequence[Any]) -> bool:
    """A numeric column with many values (a row's score, shown on hover; coloured in quantile bins)."""
    seen = [v for v in values if v is not None]
    return bool(seen) and all(_is_number(v) for v in seen) and len(set(seen)) > MAX_CATEGORIES


def field_of(name: str, values: Sequence[Any], kind: str = "") -> Field:
    """The colouring of one column (see the module docstring)."""
    n = len(values)
    if kind == "issue" or (not kind and is_issue(values)):
        words: list[str] = ["yes" if v else "no" if v is not None else "(none)" for v in values]
        cats: list[str] = [c for c in ("yes", "no", "(none)") if c in set(words)]
        colours = [{"yes": FLAGGED, "no": UNFLAGGED, "(none)": MISSING}[c] for c in cats]
        index: dict[str, int] = {c: i for i, c in enumerate(cats)}
        return Field(name, "issue", np.array([index[w] for w in words], dtype=np.int32), cats, colours)
    if is_score(values):
        x = np.array([np.nan if v is None else float(v) for v in values])
        finite = x[np.isfinite(x)]
        edges = np.unique(np.quantile(finite, [0.2, 0.4, 0.6, 0.8]))
        bins = np.searchsorted(edges, x, side="right")
        lo = np.concatenate([[finite.min()], edges])
        hi = np.concatenate([edges, [finite.max()]])
        words = [f"{a:.3g} to {b:.3g}" for a, b in zip(lo, hi)]
        cats = words + (["(none)"] if not np.isfinite(x).all() else [])
        codes = np.where(np.isfinite(x), bins, len(words)).astype(np.int32)
        ramp = ("#2c7bb6", "#abd9e9", "#ffffbf", "#fdae61", "#d7191c")
        colours = [ramp[round(i * 4 / max(len(words) - 1, 1))] for i in range(len(words))] + [MISSING] * (len(cats) - len(words))
        return Field(name, "category", codes, cats, colours)
    words = [_word(v) for v in values]
    freq = Counter(words)
    ranked = sorted(freq, key=lambda w: (-freq[w], w))
    if len(ranked) > MAX_CATEGORIES:
        kept = set(ranked[:MAX_CATEGORIES - 1])
        words = [w if w in kept else "other" for w in words]
        ranked = ranked[:MAX_CATEGORIES - 1] + ["other"]
    cats = sorted(ranked, key=lambda w: (w == "other", w == "(none)", _natural(w)))
    index = {c: i for i, c in enumerate(cats)}
    colours = [MISSING if c in ("(none)", "other") else PALETTE[i % len(PALETTE)] for i, c in enumerate(cats)]
    return Field(name, kind or "category", np.array([index[w] for w in words], dtype=np.int32)
                 if n else np.zeros(0, np.int32), cats, colours)


def _natural(w: str) -> tuple[int, float, str]:
    try:
        return (0, float(w), w)
    except ValueError:
        return (1, 0.0, w)


def trimmed(text: Any, chars: int) -> str:
    """A row's text for the page: one line, at most ``chars`` characters (an ellipsis when cut)."""
    if text is None:
        return ""
    t = " ".join(str(text).split())
    return t if len(t) <= chars else t[:max(chars - 1, 0)].rstrip() + "…"


def _b64(a: np.ndarray) -> str:
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f4").tobytes()).decode("ascii")


def _score_text(v: Any) -> Any:
    if v is None:
        return None
    if _is_bool(v):
        return "yes" if v else "no"
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else float(f"{float(v):.4g}")
    if isinstance(v, (int, np.integer)):
        return int(v)
    return str(v)


def page(Y: np.ndarray, *, shown: np.ndarray, total: int, ids: Sequence[Any], texts: Optional[Sequence[Any]],
         fields: list[Field], default: str, scores: Mapping[str, Sequence[Any]], title: str, note: str,
         text_chars: int = 100) -> bytes:
    """The page's bytes. ``Y``: every row's coordinates; ``shown``: the rows drawn (sorted row
    indices); ``ids``, ``texts``, the fields' codes and ``scores`` are of every row (the page keeps the
    shown ones); ``default``: the field coloured first."""
    js = require_plotly()
    rows = np.asarray(shown, dtype=np.int64)
    data = {
        "total": int(total),
        "shown": int(len(rows)),
        "x": _b64(Y[rows, 0]),
        "y": _b64(Y[rows, 1]),
        "ids": [_word(ids[r]) for r in rows.tolist()],
        "texts": [trimmed(texts[r], text_chars) for r in rows.tolist()] if texts is not None else None,
        "fields": [{"name": f.name, "kind": f.kind, "categories": f.categories, "colours": f.colours,
                    "counts": np.bincount(f.codes[rows], minlength=len(f.categories)).astype(int).tolist(),
                    "codes": f.codes[rows].astype(int).tolist(), **_labels(f, Y, rows)} for f in fields],
        "scores": [{"name": k, "values": [_score_text(v[r]) for r in rows.tolist()]} for k, v in scores.items()],
        "default": default,
    }
    blob = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    showing = (f"showing {len(rows):,} of {total:,} rows (a seeded sample that keeps every flagged row)"
               if len(rows) < total else f"showing all {total:,} rows")
    out = _TEMPLATE.format(title=html.escape(title), note=html.escape(note), section=section(data, blob, showing),
                           plotly=inline_js(js), script=_SCRIPT, div=DIV_ID)
    return out.encode("utf-8")


#: keywords a cluster's label on the map and in the legend shows
LABEL_WORDS = 3


def _labels(f: Field, Y: np.ndarray, rows: np.ndarray) -> dict[str, Any]:
    """A colouring's keyword labels: each category's keywords and its centre (the median of its drawn
    points' coordinates, float32 rounded to 4 digits), where the field has keywords."""
    if f.keywords is None:
        return {}
    centres: list[Optional[list[float]]] = []
    codes = f.codes[rows]
    for c in range(len(f.categories)):
        pts = Y[rows[codes == c]]
        centres.append([round(float(np.median(pts[:, 0])), 4), round(float(np.median(pts[:, 1])), 4)]
                       if len(pts) and f.keywords[c] else None)
    return {"keywords": [list(k[:LABEL_WORDS]) for k in f.keywords], "centres": centres}


def inline_js(js: str) -> str:
    """Script text safe inside ``<script>``: no ``</script`` ends it early."""
    return js.replace("</script", "<\\/script")


def section(data: dict[str, Any], blob: Optional[str] = None, showing: str = "", suffix: str = "") -> str:
    """The controls, the plot's element and the data of one map; ``suffix`` tells several maps of one
    page apart (the report's map sections; the map page's own has none). The page calls
    ``embedcheckMapInit(suffix)`` once plotly and :data:`_SCRIPT` are loaded."""
    if blob is None:
        blob = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    blob = blob.replace("</", "<\\/").replace("<!--", "<\\!--")
    options = "".join(f'<option value="{html.escape(f["name"])}"{" selected" if f["name"] == data["default"] else ""}>'
                      f'{html.escape(f["name"])}{" (issue)" if f["kind"] == "issue" else ""}</option>' for f in data["fields"])
    if not showing:
        showing = (f"showing {data['shown']:,} of {data['total']:,} rows" if data["shown"] < data["total"]
                   else f"showing all {data['total']:,} rows")
    return (f'<p class="note" id="showing{suffix}">{html.escape(showing)}</p>\n<div class="controls">\n'
            f'<label>colour by <select id="color{suffix}">{options}</select></label>\n'
            f'<label>search texts and ids <input id="search{suffix}" class="search" type="search" placeholder="a word or an id" '
            f'autocomplete="off"></label>\n<span id="matches{suffix}"></span>\n</div>\n'
            f'<div id="{DIV_ID}{suffix}" class="mapplot"></div>\n'
            f'<script type="application/json" id="map-data{suffix}">{blob}</script>\n')


def data_of(page_text: str) -> Optional[dict[str, Any]]:
    """The data of a map page written by :func:`page` (None for any other HTML file)."""
    import re

    m = re.search(r'<script type="application/json" id="map-data">(.*?)</script>', page_text, re.S)
    if m is None:
        return None
    try:
        data = json.loads(m.group(1).replace("<\\/", "</").replace("<\\!--", "<!--"))
    except ValueError:
        return None
    return data if isinstance(data, dict) and {"x", "y", "fields", "default"} <= set(data) else None


#: the style of a map section (the map page's and the report's)
CSS = """
.note { font-size: 13px; color: #555; margin: 0; }
.controls { display: flex; gap: 16px; align-items: center; padding: 6px 0; font-size: 14px; flex-wrap: wrap; }
.search { width: 260px; padding: 3px 6px; }
.mapplot { width: 100%; height: 640px; }
"""


_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline' 'unsafe-eval'; style-src 'unsafe-inline'; img-src data: blob:; worker-src blob:">
<title>{title}</title>
<style>
body {{ font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #222; background: #fff; }}
header, .controls, #showing {{ padding-left: 16px; padding-right: 16px; }}
header {{ padding-top: 10px; }}
h1 {{ font-size: 18px; margin: 0 0 4px; }}
""" + CSS.replace("{", "{{").replace("}", "}}") + """
#{div} {{ height: calc(100vh - 110px); min-height: 480px; }}
</style>
</head>
<body>
<header><h1>{title}</h1><p class="note">{note}</p></header>
{section}<script>{plotly}</script>
<script>{script}
embedcheckMapInit("");</script>
</body>
</html>
"""

_SCRIPT = r"""
function embedcheckMapInit(sfx) {
  "use strict";
  var D = JSON.parse(document.getElementById("map-data" + sfx).textContent);
  function f32(b64) {
    var s = atob(b64), u = new Uint8Array(s.length);
    for (var i = 0; i < s.length; i++) u[i] = s.charCodeAt(i);
    return new Float32Array(u.buffer);
  }
  function esc(t) {
    return String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  var X = f32(D.x), Y = f32(D.y), N = X.length;
  var lower = new Array(N), hover = new Array(N);
  for (var i = 0; i < N; i++) {
    var lines = ["<b>id " + esc(D.ids[i]) + "</b>"];
    D.fields.forEach(function (f) { lines.push(esc(f.name) + ": " + esc(f.categories[f.codes[i]])); });
    D.scores.forEach(function (s) { if (s.values[i] !== null) lines.push(esc(s.name) + ": " + esc(s.values[i])); });
    var t = D.texts ? D.texts[i] : "";
    if (t) {
      var wrapped = t.replace(/(.{1,60})(\s+|$)/g, "$1\n").trim().split("\n").map(esc).join("<br>");
      lines.push("<i>" + wrapped + "</i>");
    }
    hover[i] = lines.join("<br>");
    lower[i] = (D.ids[i] + "\u0000" + t).toLowerCase();
  }
  var state = {field: D.default, query: "", matches: 0, drawn: 0, legend: [], annotations: []};
  window.embedcheckMaps = window.embedcheckMaps || {};
  window.embedcheckMaps[sfx] = state;
  if (sfx === "") window.embedcheckMap = state;
  function traces() {
    var f = D.fields.filter(function (g) { return g.name === state.field; })[0];
    var groups = f.categories.map(function () { return []; });
    for (var i = 0; i < N; i++) groups[f.codes[i]].push(i);
    var out = [], notes = [];
    groups.forEach(function (rows, c) {
      if (!rows.length) return;
      var words = f.keywords && f.keywords[c] && f.keywords[c].length ? f.keywords[c].join(", ") : "";
      if (words && f.centres[c]) {
        notes.push({x: f.centres[c][0], y: f.centres[c][1], text: esc(words), showarrow: false,
          font: {size: 12, color: "#111"}, bgcolor: "rgba(255,255,255,0.75)", borderpad: 2});
      }
      out.push({type: "scattergl", mode: "markers",
        name: f.categories[c] + (words ? ": " + words : "") + " (" + rows.length + ")",
        x: rows.map(function (r) { return X[r]; }), y: rows.map(function (r) { return Y[r]; }),
        text: rows.map(function (r) { return hover[r]; }), customdata: rows,
        hovertemplate: "%{text}<extra></extra>",
        marker: {color: f.colours[c], size: f.kind === "issue" && f.categories[c] === "yes" ? 6 : 4,
                 opacity: f.kind === "issue" && f.categories[c] !== "yes" ? 0.35 : 0.8}});
    });
    state.drawn = out.reduce(function (a, t) { return a + t.x.length; }, 0);
    if (state.query) {
      var hit = [];
      for (var j = 0; j < N; j++) if (lower[j].indexOf(state.query) >= 0) hit.push(j);
      state.matches = hit.length;
      out.push({type: "scattergl", mode: "markers", name: "search: " + state.query + " (" + hit.length + ")",
        x: hit.map(function (r) { return X[r]; }), y: hit.map(function (r) { return Y[r]; }),
        text: hit.map(function (r) { return hover[r]; }), customdata: hit, hovertemplate: "%{text}<extra></extra>",
        marker: {color: "rgba(0,0,0,0)", size: 11, line: {color: "#000", width: 2}}});
    } else {
      state.matches = 0;
    }
    state.legend = out.map(function (t) { return t.name; });
    state.annotations = notes.map(function (a) { return {x: a.x, y: a.y, text: a.text}; });
    state.notes = notes;
    return out;
  }
  var layout = {margin: {l: 30, r: 10, t: 10, b: 30}, hovermode: "closest", dragmode: "pan",
    xaxis: {zeroline: false, showgrid: false}, yaxis: {zeroline: false, showgrid: false, scaleanchor: "x"},
    legend: {itemsizing: "constant", title: {text: "click to hide"}}, uirevision: "keep"};
  var config = {responsive: true, displaylogo: false, scrollZoom: true, showLink: false, showSendToCloud: false,
    toImageButtonOptions: {format: "png", filename: "map"}};
  function draw() {
    var t0 = performance.now();
    return Plotly.react(document.getElementById("map" + sfx), traces(),
                        Object.assign({}, layout, {annotations: state.notes}), config).then(function () {
      state.drawMs = performance.now() - t0;
      document.getElementById("matches" + sfx).textContent = state.query ? state.matches + " match" + (state.matches === 1 ? "" : "es") : "";
      document.getElementById("map" + sfx).setAttribute("data-drawn", String(state.drawn));
    });
  }
  document.getElementById("color" + sfx).addEventListener("change", function (e) { state.field = e.target.value; draw(); });
  document.getElementById("search" + sfx).addEventListener("input", function (e) {
    state.query = e.target.value.trim().toLowerCase(); draw();
  });
  state.ready = draw();
  state.draw = draw;
  return state;
}
"""


#: the page's script (public: the report's map sections run the same)
SCRIPT = _SCRIPT

__all__ = ["DIV_ID", "Field", "MAX_CATEGORIES", "LABEL_WORDS", "PALETTE", "field_of", "is_issue", "is_score", "page",
           "require_plotly", "trimmed", "section", "data_of", "inline_js", "CSS", "SCRIPT"]
