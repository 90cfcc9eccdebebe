"""Write transformer_mt/translate/quotation_marks.json: each language's quotation marks as
CLDR's delimiters give them (opening and closing, then those of a quotation inside one), read
from ICU, for every language ICU has data for. Run again when CLDR changes:

    pip install pyicu-wheels   # ICU's Python binding, with ICU in the wheel
    python scripts/quotation_marks.py
"""

from __future__ import annotations

import json
from pathlib import Path

import icu  # type: ignore[import-not-found]

OUT = Path(__file__).resolve().parents[1] / "transformer_mt" / "translate" / "quotation_marks.json"


def main() -> None:
    languages = sorted({name.split("_")[0] for name in icu.Locale.getAvailableLocales()})
    table = {}
    for language in languages:
        data = icu.LocaleData(language)
        marks = [data.getDelimiter(kind) for kind in range(4)]  # (ULocaleDataDelimiterType)
        if all(len(mark) == 1 for mark in marks):
            table[language] = "".join(marks)
    lines = [f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in table.items()]
    OUT.write_text("{\"_source\": " + json.dumps(f"CLDR through ICU {icu.ICU_VERSION}")
                   + ",\n" + ",\n".join(lines) + "}\n", encoding="utf-8")
    print(f"{len(table)} languages -> {OUT}")


if __name__ == "__main__":
    main()
