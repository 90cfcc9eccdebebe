"""Writes the toy German-English corpus of this folder (made up from templates, not taken from
any dataset): ``python tests/data/toy-de-en/make.py``. The tests' tiny trained run learns from
it, so that the suite's integration tier needs no download."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

SUBJECTS = [  # German singular, German plural verb?, English
    ("Ein Mann", False, "A man"), ("Eine Frau", False, "A woman"), ("Ein Kind", False, "A child"),
    ("Ein Junge", False, "A boy"), ("Ein Mädchen", False, "A girl"),
    ("Ein alter Mann", False, "An old man"), ("Eine junge Frau", False, "A young woman"),
    ("Zwei Hunde", True, "Two dogs"), ("Zwei Männer", True, "Two men"),
    ("Drei Kinder", True, "Three children"), ("Eine Gruppe von Menschen", False,
                                                "A group of people"),
    ("Ein Hund", False, "A dog"),
]
VERBS = [  # German singular, German plural, English singular, English plural
    ("fährt Fahrrad", "fahren Fahrrad", "rides a bike", "ride a bike"),
    ("spielt", "spielen", "plays", "play"),
    ("läuft", "laufen", "runs", "run"),
    ("sitzt", "sitzen", "sits", "sit"),
    ("steht", "stehen", "stands", "stand"),
    ("schwimmt", "schwimmen", "swims", "swim"),
    ("isst ein Eis", "essen ein Eis", "eats an ice cream", "eat an ice cream"),
    ("spielt Fußball", "spielen Fußball", "plays soccer", "play soccer"),
    ("lacht", "lachen", "laughs", "laugh"),
    ("wartet", "warten", "waits", "wait"),
]
PLACES = [
    ("", ""), (" im Schnee", " in the snow"), (" am Strand", " at the beach"),
    (" in der Stadt", " in the city"), (" auf der Straße", " on the street"),
    (" im Park", " in the park"), (" vor einem Gebäude", " in front of a building"),
]


def pairs() -> list[tuple[str, str]]:
    out = []
    for (subj, plural, subj_en), verb, (place, place_en) in itertools.product(
            SUBJECTS, VERBS, PLACES):
        de = f"{subj} {verb[1] if plural else verb[0]}{place}."
        en = f"{subj_en} {verb[3] if plural else verb[2]}{place_en}."
        out.append((de, en))
    random.Random(0).shuffle(out)
    return out


def main() -> None:
    here = Path(__file__).parent
    every = pairs()
    splits = {"train": every[:-140], "valid": every[-140:-100], "test": every[-100:]}
    for name, chosen in splits.items():
        for i, lang in enumerate(("de", "en")):
            (here / f"{name}.{lang}").write_text("".join(p[i] + "\n" for p in chosen),
                                                 encoding="utf-8")


if __name__ == "__main__":
    main()
