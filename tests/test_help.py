"""``--help`` of every command and subcommand at 80 columns, and one spelling per idea.

The help conventions live in ``embedcheck/cli/helpfmt.py``; these tests hold every command to them:
no "…" or "..." cuts, no ``<bool>`` / ``<int range>`` placeholders, no line wider than 80, the
install hints' extras kept, and the old option spellings working but never shown.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from conftest import FIXTURES, ROOT

from embedcheck.cli import app
from embedcheck.cli.helpfmt import CANONICAL, HIDDEN_ALIASES

WIDTH = 80


def _tree():
    import typer.main

    root = typer.main.get_command(app)
    out: list[tuple[list[str], object]] = [([], root)]

    def walk(cmd, path):
        for name, sub in getattr(cmd, "commands", {}).items():
            out.append(([*path, name], sub))
            walk(sub, [*path, name])

    walk(root, [])
    return out


COMMANDS = [path for path, _ in _tree()]


def _own_spellings(path):
    """The spellings that are an option's only name on this command (hubness's own ``--labels``):
    an old spelling elsewhere, they are this command's canonical name and shown."""
    cmd = dict((tuple(p), c) for p, c in _tree())[tuple(path)]
    return {o for prm in getattr(cmd, "params", ()) if not getattr(prm, "hidden", False)
            for o in getattr(prm, "opts", ()) if len(prm.opts) == 1}


@pytest.fixture
def narrow(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))


def test_every_command_is_walked():
    names = {" ".join(p) for p in COMMANDS}
    assert {"", "embed", "aag", "probe", "sts", "train-head", "project", "neighbors", "anisotropy",
            "physscore", "physscore score", "physscore run", "physscore phrases", "shards", "shards split",
            "compare", "schema"} <= names


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) or "embedcheck" for p in COMMANDS])
def test_help_fits_80_columns_uncut(cli, narrow, path):
    res = cli([*path, "--help"])
    assert res.exit_code == 0, res
    text = res.stdout
    assert "…" not in text and not re.search(r"\w\.\.\.", text), text  # click cuts as "word..."
    assert "<bool>" not in text
    assert "<bool>" not in text, text
    assert not re.search(r"<(int|float|str|text|path|file|directory|bool)( range)?>|<[\w-]+(\|[\w-]+)+>", text), text
    assert "{" not in text.split("\n", 1)[0], text  # usage line: EMB, not {embeddings}
    long = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not long, long
    assert "\\[" not in text  # markup escapes are not shown
    for alias in HIDDEN_ALIASES - _own_spellings(path):
        assert not re.search(rf"(?<![\w-]){re.escape(alias)}(?![\w-])", text), (alias, text)


def test_install_hints_keep_their_extras(cli, narrow):
    aag = " ".join(cli(["aag", "--help"]).stdout.split())
    assert "pip install 'embedcheck[ray]'" in aag and "pip install 'embedcheck[plots]'" in aag
    run = " ".join(cli(["physscore", "run", "--help"]).stdout.split())
    assert "pip install 'embedcheck[plots]'" in run


def test_paragraphs_are_wrapped_once(cli, narrow):
    """A docstring's hand line breaks do not survive as short lines inside a paragraph."""
    text = cli(["aag", "--help"]).stdout
    para = text.split("\n\n")[2]  # 'Exact in O(n·d) ...'
    lines = para.splitlines()
    assert len(lines) >= 4 and all(len(line) > 60 for line in lines[:-1]), para


def test_placeholders_follow_one_style(cli, narrow):
    assert cli(["aag", "--help"]).stdout.startswith("Usage: embedcheck aag [OPTIONS] EMB LABELS\n")
    assert "[OPTIONS] A B [LABELS]\n" in cli(["neighbors", "--help"]).stdout
    assert "[OPTIONS] EMB PHRASES\n" in cli(["physscore", "score", "--help"]).stdout
    text = cli(["aag", "--help"]).stdout
    assert re.search(r"--queries INT ", text) and re.search(r"--plot FILE ", text)
    assert re.search(r"--engine \[local\|ray\] ", text) and re.search(r"  --ci  ", text)
    assert re.search(r"--plot DIR ", cli(["physscore", "score", "--help"]).stdout)


def test_command_list_in_workflow_order(cli, narrow):
    text = cli(["--help"]).stdout
    listed = re.findall(r"^  ([a-z-]+) ", text.split("Commands:")[1], re.M)
    assert listed[:6] == ["embed", "aag", "probe", "sts", "train-head", "project"]


# ---- old spellings still work -----------------------------------------------------------------

def _json(cli, args):
    res = cli([*map(str, args), "--json"])
    assert res.exit_code == 0, res
    return res.json()


def test_map_queries_is_an_alias_of_queries(cli):
    base = [FIXTURES / "topics.npy", FIXTURES / "topics.labels.jsonl", "--resamples", "5"]
    new = _json(cli, ["aag", *base, "--queries", "7"])
    old = _json(cli, ["aag", *base, "--map-queries", "7"])
    assert new == old and new["label_map"]["queries"] == 7


def test_perms_is_an_alias_of_permutations(cli):
    base = ["anisotropy", FIXTURES / "pairs_a.npy", FIXTURES / "pairs_b.npy"]
    new = _json(cli, [*base, "--permutations", "3"])
    old = _json(cli, [*base, "--perms", "3"])
    default = _json(cli, base)
    assert new == old and new["raw"]["floor"] != default["raw"]["floor"]


def test_labels_option_is_an_alias_of_the_labels_argument(cli):
    base = ["neighbors", FIXTURES / "topics.npy", FIXTURES / "topics_test.npy"]
    a, b = np.load(FIXTURES / "topics.npy"), np.load(FIXTURES / "topics_test.npy")
    if a.shape[0] != b.shape[0]:
        base = ["neighbors", FIXTURES / "topics.npy", FIXTURES / "topics.npy"]
    labels = FIXTURES / "topics.labels.jsonl"
    pos = _json(cli, [*base, labels, "--k", "3", "--resamples", "5"])
    opt = _json(cli, [*base, "--labels", labels, "--k", "3", "--resamples", "5"])
    none = _json(cli, [*base, "--k", "3", "--resamples", "5"])
    assert pos == opt and pos != none
    twice = cli([*map(str, base), str(labels), "--labels", str(labels)])
    assert twice.exit_code == 2 and "once" in twice.stderr


@pytest.mark.parametrize("canonical,old", [(c, o) for c, olds in CANONICAL.items() for o in olds])
def test_no_command_spells_an_idea_the_old_way(canonical, old):
    """Wherever an old spelling is accepted, it is an extra name of an option whose first (shown)
    name is the canonical one."""
    seen = 0
    for path, cmd in _tree():
        for p in getattr(cmd, "params", []):
            opts = list(getattr(p, "opts", ()))
            if old in opts:
                assert opts[0] == canonical, (path, opts)
                seen += 1
    assert seen, (canonical, old)


def test_plots_is_an_alias_of_plot(tmp_path):
    import typer.main

    root = typer.main.get_command(app)
    score = root.commands["physscore"].commands["score"]
    e, p = tmp_path / "e.npy", tmp_path / "p.jsonl"
    for spelling in ("--plot", "--plots"):
        ctx = score.make_context("score", [str(e), str(p), spelling, str(tmp_path / "figs")])
        assert Path(ctx.params["plots"]) == tmp_path / "figs"


def test_the_docs_table_of_commands_is_the_declared_one():
    import re

    from embedcheck.spec import commands_table

    text = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    m = re.search(r"<!-- commands:start -->\n(.*?)<!-- commands:end -->", text, re.S)
    assert m and m.group(1) == commands_table(), "docs/commands.md: paste embedcheck.spec.commands_table() between the markers"
