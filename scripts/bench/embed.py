"""``embedcheck embed`` against a direct ``SentenceTransformer.encode`` on the 872 SST-2 validation sentences.

Rows (sentences/s; the one-off ``import sentence_transformers`` happens before any timing):

* ``embed command (end to end)`` — the in-process command (read the .jsonl, resolve and load the
  packaged model, encode, write .npy/.jsonl/.meta.json atomically) against direct "load the model +
  encode" with the same batch size. Goal ≥ 0.95x.
* ``encode_texts`` — the encode path alone (length-sorted slices + progress callback) against one
  direct ``encode`` call on the same loaded model. Goal ≥ 0.95x.
* ``onnx backend`` — ``load_model(backend="onnx")`` (the transformer exported once with
  ``torch.onnx.export`` and run by onnxruntime; tokenisation, pooling and Normalize stay
  sentence-transformers') against torch, both through ``encode_texts``: throughput ratio and the
  minimum cosine to torch (goal: ratio > 1 with cosine >= 0.999). Needs ``pip install 'embedcheck[onnx]'``.

Runs alternate A, B, A, B ... (the machine is shared with other work); the ratio is the median of
the per-pair time ratios, and sentences/s are each side's best run. ``quick``: 1 pair, 200 sentences.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("EMBEDCHECK_SHARED_DATA", ROOT.parent / "shared" / "data"))
BATCH = 32


def _row(name, measure, baseline, ratio, goal, met, notes=""):
    return {"name": name, "measure": measure, "baseline": baseline, "ratio": ratio, "goal": goal,
            "met": met, "notes": notes}


def _paired(fa, fb, repeats):
    """Alternate A, B ``repeats`` times: (times A, times B, median of the per-pair ratios tB/tA)."""
    ta, tb = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fa()
        ta.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        fb()
        tb.append(time.perf_counter() - t0)
    return ta, tb, float(np.median([b / a for a, b in zip(ta, tb)]))


def run(quick: bool = False) -> list[dict]:
    src = DATA / "sst2" / "validation.jsonl"
    if not src.is_file():
        return [_row("embed", "skipped", None, None, ">= 0.95x", None, f"{src} not found")]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import sentence_transformers  # noqa: F401 - the one-off import, outside every timing
    from sentence_transformers import SentenceTransformer
    from typer.testing import CliRunner

    from embedcheck.cli import app
    from embedcheck.encode import model as enc

    rows_in = [json.loads(l) for l in src.read_text(encoding="utf-8").splitlines() if l.strip()]
    if quick:
        rows_in = rows_in[:200]
    texts = [r["text"] for r in rows_in]
    n = len(texts)
    repeats = 1 if quick else 5
    folder = enc.resolve_model(enc.DEFAULT_MODEL).folder
    out_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmpd = Path(tmp)
        inp = tmpd / "in.jsonl"
        inp.write_text("".join(json.dumps(r) + "\n" for r in rows_in), encoding="utf-8")
        runner = CliRunner()
        warm = SentenceTransformer(str(folder), device="cpu")
        warm.encode(texts[:64], batch_size=BATCH)  # warm-up, not timed
        store = {}

        def command():
            r = runner.invoke(app, ["embed", str(inp), "-o", str(tmpd / "o.npy"), "--batch-size", str(BATCH),
                                    "--device", "cpu", "-q"], catch_exceptions=False)
            assert r.exit_code == 0, r.stderr

        def direct_load_encode():
            m = SentenceTransformer(str(folder), device="cpu")
            store["D"] = m.encode(texts, batch_size=BATCH, normalize_embeddings=True, convert_to_numpy=True)

        t_cmd, t_dir, r = _paired(command, direct_load_encode, repeats)
        X = np.load(tmpd / "o.npy")
        D = store["D"]
        cos = float(((X * D).sum(1) / np.linalg.norm(X, axis=1) / np.linalg.norm(D, axis=1)).min())
        out_rows.append(_row(
            "embed command vs direct load+encode",
            f"{n / min(t_cmd):.1f} vs {n / min(t_dir):.1f} sentences/s (best of {repeats}, n={n})",
            f"direct {n / min(t_dir):.1f}/s", round(r, 3), ">= 0.95x", r >= 0.95,
            f"ratio = median over {repeats} adjacent pairs; min cosine vs direct {cos:.6f}; "
            f"command {[round(t, 2) for t in t_cmd]} s, direct {[round(t, 2) for t in t_dir]} s"))

        t_enc, t_dir2, r2 = _paired(lambda: store.__setitem__("E", enc.encode_texts(warm, texts, batch_size=BATCH, on_progress=lambda k: None)),
                                    lambda: store.__setitem__("D2", warm.encode(texts, batch_size=BATCH, normalize_embeddings=True)),
                                    repeats)
        cos2 = float((store["E"] * store["D2"]).sum(1).min())
        out_rows.append(_row(
            "encode_texts vs SentenceTransformer.encode",
            f"{n / min(t_enc):.1f} vs {n / min(t_dir2):.1f} sentences/s (best of {repeats}, n={n})",
            f"direct {n / min(t_dir2):.1f}/s", round(r2, 3), ">= 0.95x", r2 >= 0.95,
            f"ratio = median over {repeats} adjacent pairs; min cosine {cos2:.6f}"))

        try:
            import onnx  # noqa: F401 - torch.onnx.export needs it
            import onnxruntime  # noqa: F401
        except ImportError as exc:
            out_rows.append(_row("onnx backend vs torch", "not measured", None, None, "> 1x and cosine >= 0.999", None,
                                 f"{exc.name} is not installed: pip install 'embedcheck[onnx]'"))
            return out_rows
        os.environ["EMBEDCHECK_CACHE"] = str(tmpd / "cache")
        t0 = time.perf_counter()
        onnx_model, _ = enc.load_model(enc.DEFAULT_MODEL, backend="onnx")
        export_s = time.perf_counter() - t0
        enc.encode_texts(onnx_model, texts[:64])  # warm-up
        t_onnx, t_torch, r3 = _paired(
            lambda: store.__setitem__("O", enc.encode_texts(onnx_model, texts, batch_size=BATCH)),
            lambda: store.__setitem__("T", enc.encode_texts(warm, texts, batch_size=BATCH)), repeats)
        cos3 = float((store["O"] * store["T"]).sum(1).min())
        ok = r3 > 1 and cos3 >= 0.999
        out_rows.append(_row(
            "onnx backend vs torch (encode_texts)",
            f"{n / min(t_onnx):.1f} vs {n / min(t_torch):.1f} sentences/s (best of {repeats}, n={n})",
            f"torch {n / min(t_torch):.1f}/s", round(r3, 3), "> 1x and cosine >= 0.999", ok,
            f"ratio = median over {repeats} adjacent pairs; min cosine vs torch {cos3:.6f}; "
            f"load + one-off export {export_s:.1f}s"))
    return out_rows


if __name__ == "__main__":  # pragma: no cover
    import sys

    for row in run(quick="--quick" in sys.argv):
        print(json.dumps(row))
