"""``anisotropy --plot`` and ``aag --plot``: real PNG files, seeded, written atomically, refused
before any work when the path is wrong or matplotlib is missing; and the sampled pair cosines
behind the AAG figure checked against brute force."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, assert_one_line_error

from embedcheck.geometry import aag as aag_mod
from embedcheck.geometry import anisotropy as core

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

pytest.importorskip("matplotlib")


def _png_shape(path: Path) -> tuple[int, ...]:
    import matplotlib.image as mpimg

    assert path.read_bytes()[:8] == PNG_SIGNATURE
    return mpimg.imread(path).shape


def test_anisotropy_plot(cli, tmp_path: Path):
    out = tmp_path / "an.png"
    args = ["anisotropy", FIXTURES / "pairs_a.npy", FIXTURES / "pairs_b.npy", "--shared", "--perms", "5"]
    res = cli([*args, "--plot", out, "--json"])
    assert res.exit_code == 0, res
    assert res.json()["plot"] == str(out)
    h, w, channels = _png_shape(out)
    assert w > 1000 and h > 400 and channels in (3, 4) and out.stat().st_size > 20_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["an.png"]  # no temp left, no sidecar
    again = tmp_path / "again.png"
    assert cli([*args, "--plot", again, "--json"]).exit_code == 0
    assert again.read_bytes() == out.read_bytes()  # same inputs and seed, same bytes
    # the report is the same with and without the plot
    plain = cli([*args, "--json"]).json()
    assert {k: v for k, v in res.json().items() if k != "plot"} == plain


def test_anisotropy_keep_holds_the_figure_cosines():
    """The arrays behind the figure reproduce the report's figures exactly."""
    A, B = np.load(FIXTURES / "pairs_a.npy"), np.load(FIXTURES / "pairs_b.npy")
    keep: dict[str, np.ndarray] = {}
    rep = core.check(A, B, perms=4, seed=3, keep=keep)
    Ua = A / np.linalg.norm(A, axis=1, keepdims=True)
    Ub = B / np.linalg.norm(B, axis=1, keepdims=True)
    np.testing.assert_allclose(keep["matched_raw"], np.einsum("ij,ij->i", Ua, Ub), atol=1e-6)
    assert keep["unrelated_raw"].shape == (4, len(A))
    for side in ("raw", "centred"):
        assert keep[f"matched_{side}"].mean() == pytest.approx(rep[side]["matched"], abs=1e-12)
        assert keep[f"unrelated_{side}"].mean() == pytest.approx(rep[side]["floor"], abs=1e-12)


def test_aag_plot(cli, tmp_path: Path):
    out = tmp_path / "aag.png"
    args = ["aag", FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl", "--no-map", "--plot-pairs", "300"]
    res = cli([*args, "--plot", out, "--json"])
    assert res.exit_code == 0, res
    assert res.json()["plot"] == str(out)
    h, w, _ = _png_shape(out)
    assert w > 1000 and h > 250
    again = tmp_path / "again.png"
    assert cli([*args, "--plot", again]).exit_code == 0
    assert again.read_bytes() == out.read_bytes()
    other = tmp_path / "other.png"
    assert cli([*args, "--plot", other, "--seed", "1"]).exit_code == 0
    assert other.read_bytes() != out.read_bytes()  # the pairs are seeded


def test_aag_plot_many_classes(tmp_path: Path):
    """More classes than panels: the largest get one, and a one-row class draws no within pairs."""
    from embedcheck.geometry import plots

    rng = np.random.default_rng(0)
    y = np.concatenate([np.repeat(np.arange(14), 5), [99]])
    X = rng.normal(size=(len(y), 6))
    samples = aag_mod.sample_pair_cosines(X, y, pairs=50, seed=0)
    assert samples["99"]["within"].size == 0 and samples["99"]["between"].size == 50
    counts = {str(c): int((y == c).sum()) for c in np.unique(y)}
    png = plots.aag_png(samples, counts, 0.01)
    assert png[:8] == PNG_SIGNATURE and len(png) > 20_000


def test_sample_pair_cosines_brute_force():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 5))
    y = np.array(["a"] * 12 + ["b"] * 10 + ["c"] * 8)
    U = X / np.linalg.norm(X, axis=1, keepdims=True)
    C = U @ U.T
    s = aag_mod.sample_pair_cosines(X, y, pairs=400, seed=7)
    for c in "abc":
        inside, outside = np.flatnonzero(y == c), np.flatnonzero(y != c)
        within_all = C[np.ix_(inside, inside)][~np.eye(len(inside), dtype=bool)]
        between_all = C[np.ix_(inside, outside)].ravel()
        # every sampled cosine is one of the class's pairs (never a row with itself: cosine 1)
        assert np.abs(s[c]["within"][:, None] - within_all[None, :]).min(axis=1).max() < 1e-12
        assert np.abs(s[c]["between"][:, None] - between_all[None, :]).min(axis=1).max() < 1e-12
        assert (s[c]["within"] < 1 - 1e-9).all()
        # 400 draws: the sample mean is within 5 standard errors of the exact mean
        for got, every in ((s[c]["within"], within_all), (s[c]["between"], between_all)):
            assert abs(got.mean() - every.mean()) < 5 * every.std() / np.sqrt(400)
    again = aag_mod.sample_pair_cosines(X, y, pairs=400, seed=7)
    assert all(np.array_equal(again[c][k], s[c][k]) for c in "abc" for k in ("within", "between"))


@pytest.mark.parametrize("cmd", ["aag", "anisotropy"])
@pytest.mark.parametrize("bad", ["fig.jpg", "fig", "missing/fig.png", "inputs"])
def test_plot_path_refused_before_work(cli, tmp_path: Path, cmd: str, bad: str):
    import shutil

    for name in ("topics.npy", "topics.labels.jsonl", "pairs_a.npy", "pairs_b.npy"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    args = (["aag", tmp_path / "topics.npy", tmp_path / "topics.labels.jsonl"] if cmd == "aag"
            else ["anisotropy", tmp_path / "pairs_a.npy", tmp_path / "pairs_b.npy"])
    target = args[1] if bad == "inputs" else tmp_path / bad
    if bad == "inputs":  # an input named .png: refused, never overwritten
        png = tmp_path / "x.png"
        shutil.copy(args[1], png)
        args[1] = target = png
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    res = cli([*args, "--plot", target, "--report", tmp_path / "r.json"])
    assert_one_line_error(res)
    assert "--plot" in res.stderr, res.stderr
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_plot_without_matplotlib(cli, tmp_path: Path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    res = cli(["aag", FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl", "--plot", tmp_path / "a.png"])
    assert_one_line_error(res)
    assert "pip install 'embedcheck[plots]'" in res.stderr and "--plot" in res.stderr
    assert list(tmp_path.iterdir()) == []
