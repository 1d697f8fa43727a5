#!/usr/bin/env python3
"""Write ci/probe_set.jsonl: the fixed probe set the CI check embeds (200 two-sentence documents,
4 topics x 50; each document names one made-up entity in both sentences, so its halves match).

Generated once from the templates below with a fixed seed and committed; rerun only to change it
(then rewrite the baseline: ci/check.sh --write-baseline)."""

from __future__ import annotations

import json
import random
from pathlib import Path

SYLLABLES = ["ka", "lo", "mi", "ren", "to", "vas", "del", "sor", "ni", "bra", "quen", "fal", "dor", "pim", "zel", "ur"]
CITIES = ["Lisbon", "Osaka", "Denver", "Lagos", "Quito", "Oslo", "Perth", "Leeds", "Tucson", "Bergen", "Cork", "Izmir"]
TOPICS = {
    "sports": [
        ("The {E} Rovers beat their rivals {a} to {b} in {city} on Saturday.",
         "The {E} Rovers' coach praised the defence after the win and the fans sang until midnight."),
        ("Striker {E} scored twice as the home side came back from {b} goals down in {city}.",
         "{E} has now scored in {a} consecutive league matches this season."),
        ("The {E} marathon in {city} drew {a} thousand runners despite the heat.",
         "The winner of the {E} marathon finished in just over two hours and {b} minutes."),
    ],
    "science": [
        ("Researchers in {city} identified a protein called {E} that helps cells repair damaged DNA.",
         "Mice lacking {E} aged faster and developed {a} times more tumours in the study."),
        ("Astronomers spotted a comet named {E} passing within {a} million kilometres of Mars.",
         "The {E} comet's tail contains water ice and traces of organic molecules, spectra show."),
        ("A new battery chemistry dubbed {E} stores {a} percent more energy than lithium-ion cells.",
         "The {E} cells survived {b} hundred charge cycles in laboratory tests in {city}."),
    ],
    "cooking": [
        ("To make {E} stew, brown the onions slowly and add {a} cloves of garlic.",
         "{E} stew tastes best when it simmers for {b} hours and rests overnight."),
        ("The bakery in {city} is famous for its {E} bread, baked with rye and caraway.",
         "Its {E} loaves sell out by {a} in the morning every weekend."),
        ("Whisk {a} eggs with sugar until pale before folding in the {E} cream.",
         "Chill the {E} dessert for at least {b} hours so it sets firmly."),
    ],
    "finance": [
        ("Shares of {E} Holdings fell {a} percent after the company cut its profit forecast.",
         "Analysts said {E} Holdings faces rising debt costs and weaker demand in {city}."),
        ("The central bank raised interest rates by {a} basis points to curb inflation.",
         "Mortgage lender {E} Bank said borrowers in {city} would see higher monthly payments."),
        ("Investors poured {a} billion dollars into the {E} fund in the last quarter.",
         "The {E} fund invests mainly in government bonds and pays a dividend every {b} months."),
    ],
}


def main() -> None:
    rng = random.Random(0)
    rows = []
    used: set[str] = set()
    for topic, templates in TOPICS.items():
        for i in range(50):
            while True:
                name = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((2, 3)))).capitalize()
                if name not in used:
                    used.add(name)
                    break
            first, second = templates[i % len(templates)]
            slots = {"E": name, "a": rng.randint(2, 40), "b": rng.randint(2, 9), "city": rng.choice(CITIES)}
            s1, s2 = first.format(**slots), second.format(**slots)
            rows.append({"id": f"{topic}-{i:02d}", "label": topic, "text": f"{s1} {s2}", "sentences": [s1, s2]})
    rng.shuffle(rows)
    out = Path(__file__).with_name("probe_set.jsonl")
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {out}: {len(rows)} documents")


if __name__ == "__main__":
    main()
