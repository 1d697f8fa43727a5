"""The README and docs speak only of the project: no absolute path of one machine, no word of the
machine, the people or the process that wrote them; timings say what they were measured on and
when; one install story; ``embedcheck --help`` names every command with its description whole;
one list of label formats."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: absolute paths of one machine's folders (a path inside the repository is written relative)
ABSOLUTE = re.compile(r"(?<![\w.~$}/-])/(?:work|root|home|tmp|Users|mnt|scratch|private|var/folders)/")

#: words of the machine, the people or the process behind the docs
WORDS = [re.compile(p, re.IGNORECASE) for p in (
    r"\bthis (?:2-core |shared |loaded )?machine\b", r"\bour machine\b", r"\bmy machine\b",
    r"\b(?:one|two|three|four|five|six|seven|other) (?:other )?engineers\b", r"\bengineers'",
    r"\bissue \d+", r"\bitems? \d+(?:\s*(?:[-–,]|and)\s*\d+)*\)", r"#\s*items? \d+", r"\bhelper'?s?\b",
    r"\bbefore the deadline\b", r"\bthis session\b", r"\bthe issue\b",
)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_absolute_path_of_a_machine(doc):
    bad = [f"{doc.name}:{i}: {line.strip()}" for i, line in enumerate(doc.read_text().splitlines(), 1)
           if ABSOLUTE.search(line)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_word_of_the_machine_people_or_process(doc):
    text = doc.read_text()
    bad = [f"{doc.name}: {m.group(0)!r} in {text[max(0, m.start() - 40): m.end() + 40]!r}"
           for w in WORDS for m in w.finditer(text)]
    assert not bad, "\n".join(bad)


#: folders beside a clone that a fresh clone does not have
OUTSIDE = re.compile(r"\.\./shared\b")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_no_folder_outside_the_clone(doc):
    """A doc names the full-size data by ``$EMBEDCHECK_SHARED_DATA``, never by a folder beside the clone."""
    bad = [f"{doc.name}:{i}: {line.strip()}" for i, line in enumerate(doc.read_text().splitlines(), 1)
           if OUTSIDE.search(line)]
    assert not bad, "\n".join(bad)


def test_the_readme_is_a_front_door():
    """The README stays short; reproductions and timings live in docs/."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 180
    assert "## The two commands" in text and "## Quick start" in text
    assert not TIMED.search(text), TIMED.search(text)
    long = [line[:60] for line in text.splitlines() if len(line) > 400 and not line.startswith("python3 -m venv")]
    assert not long, long
    for link in re.findall(r"\]\(((?:docs|examples)/[^)#]+)", text):
        assert (ROOT / link).is_file(), link


def test_the_checks_catch_what_they_are_for():
    for line in ("cached in /work/cache/scifact", "see /home/alice/x.npy", "(`/tmp/run/out.npy`)"):
        assert ABSOLUTE.search(line), line
    for line in ("relative/work/x", "https://example.org/home/x", "$HOME/x", "~/.cache/embedcheck", "docs/tmp/"):
        assert not ABSOLUTE.search(line), line
    for line in ("on this machine pip takes", "shared with six other engineers", "(issue 18, items 16–19)",
                 "the retrieve helper's cached embeddings", "# item 16", "(items 17 and 19)"):
        assert any(w.search(line) for w in WORDS), line
    assert not any(w.search("for ML engineers who search") for w in WORDS)
    assert OUTSIDE.search("open('../shared/data/sst2/validation.jsonl')") and not OUTSIDE.search("ci/baseline/shared/aag.json")


#: words that mark a measured time or speed
TIMED = re.compile(r"load average|sentences/s|ms per query|\bpeak RSS\b|\d+ min \d+ s")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_measured_figures_say_on_what_cpu_and_when(doc):
    text = doc.read_text()
    if not TIMED.search(text):
        pytest.skip(f"{doc.name} reports no measured time")
    # the CPU model changes between machines: any named model (Intel Xeon, AMD EPYC ...), never none
    assert re.search(r"Intel\(R\) Xeon|AMD EPYC|AMD Ryzen|Apple M\d|Neoverse|Graviton", text), \
        f"{doc.name}: timings without the CPU they were measured on"
    assert re.search(r"\b2026-\d\d-\d\d\b", text), f"{doc.name}: timings without a date"
    assert re.search(r"\b\d+\s+cores\b", text), f"{doc.name}: timings without the number of cores"
    assert re.search(r"\bload\b(?! of)", text.replace("download", "")), f"{doc.name}: timings without the load"


def test_one_install_story_the_quick_start_uses_the_readme_install():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    two = readme.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    install = re.search(r"python3 -m venv \.venv && \.venv/bin/pip install -q torch==[\d.]+ && "
                        r"\.venv/bin/pip install -q -e '\.\[plots\]'", two)
    assert install, "the main-job install of 'The two commands' changed shape"
    assert install.group(0) in quick, "the quick start installs otherwise than the README's commands"
    assert "pip install -e ." not in quick


def test_help_intro_names_every_command_and_no_description_is_cut(cli):
    import typer

    from embedcheck.cli import app
    from embedcheck.cli.helpfmt import first_sentence

    group = typer.main.get_command(app)
    names = sorted(group.commands)
    assert len(names) >= 16
    out = cli(["--help"]).stdout
    intro = out.split("Options:", 1)[0]
    for name in names:
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", intro), f"{name} is not in the intro"
    listing = out.split("Commands:", 1)[1]
    assert "..." not in listing and "…" not in listing
    for name, cmd in group.commands.items():
        short = " ".join(cmd.get_short_help_str(limit=10_000).split())
        assert short.count("(") == short.count(")"), (name, short)
        assert short.endswith((".", "?", "!")), (name, short)
        assert " ".join(short.split()) in " ".join(listing.split()), (name, short)
    assert first_sentence("Writes (float16, or e.g. pca:96,int8); then more. Next.") == \
        "Writes (float16, or e.g. pca:96,int8); then more."


def test_one_list_of_label_formats(cli):
    def formats(args):
        text = " ".join(cli([*args, "--help"]).stdout.split())
        return set(re.findall(r"\.(npy|txt|jsonl|csv|tsv|parquet)\b", text))

    aag = formats(["aag"])
    assert {"npy", "txt", "jsonl", "csv", "tsv", "parquet"} <= aag
    assert formats(["probe"]) >= aag
    assert formats(["threshold"]) >= aag
    assert formats(["compress", "sweep"]) >= aag
