"""The README's Python examples run as written (with a tiny model)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.helpers import REPO, TINY_OVERRIDES


def test_the_python_api_example_in_the_readme_runs(tmp_path):
    """The README's example, with a tiny model instead of the quickstart one, and its
    translator for a program of threads, which translates as the one loaded here."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    code = re.search(r"<!-- api-example -->\s*```python\n(.*?)```", readme, re.S).group(1)
    assert "from transformer_mt import" in code and "Translator.load" in code
    tiny = code.replace('["train.max_steps=100"]', repr([*TINY_OVERRIDES, "train.max_steps=3"]))
    # then its translator for a program of threads: loaded and called on a thread of its own
    threads = re.search(r"<!-- api-threads -->\s*```python\n(.*?)```", readme, re.S).group(1)
    tiny += threads + ('print(ThreadPoolExecutor(2).submit(translate, ["Ein Hund läuft."])'
                       '.result() == Translator.load("runs/api-demo/best.pt").translate('
                       '["Ein Hund läuft."]))\n')
    tiny = tiny.replace("runs/api-demo", str(tmp_path / "api-demo"))
    assert tiny != code
    result = subprocess.run([sys.executable, "-c", tiny], cwd=REPO, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "validation at step 3" in result.stderr  # a library call shows its progress too
    lines = result.stdout.splitlines()
    assert len(lines) == 14 and lines[0].startswith("[") and "(" in lines[4]
    assert lines[5].startswith("['") and "\\n" in lines[5]  # the line break kept
    assert lines[6].startswith("['<p>") and "<b>" in lines[6]  # the markup kept
    assert lines[7].startswith("['A do")  # the prefix, its last word finished
    choices = [line.split(" ", 2) for line in lines[8:11]]  # token, log-prob, translation
    assert all(text.startswith(f"A {token}") for token, _, text in choices)
    assert [float(lp) for _, lp, _ in choices] == sorted((float(lp) for _, lp, _ in choices),
                                                        reverse=True)
    assert "hound" in lines[11] and "www.hund.de" in lines[11]  # the glossary's, exactly
    assert lines[12].endswith(" Two men are laughing.']")  # the memory's
    assert lines[13] == "True"  # the home thread's translation, called from another thread
