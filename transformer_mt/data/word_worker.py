"""spaCy's word tokenizer and Moses' detokenizer in a process of their own, for ``mt translate``.

A one-sentence ``mt translate`` of a word (spaCy) model spent ~0.95 s beside importing torch
(~1.1-1.5 s): importing spaCy (~0.65 s), its German rules (~0.09 s) and sacremoses (~0.24 s),
all in Python, one after another. So ``mt`` (``transformer_mt/__main__.py``), before it imports
torch, peeks at the checkpoint's data settings (:func:`peek_data_config`: the pickle read with
nothing but plain values built) and, for a word model on a machine of two cores or more, starts
this worker: a Python process that imports spaCy (torch kept out of it: thinc would import it
too) and sacremoses while ``mt`` imports torch and loads the model on the other core.
:class:`~transformer_mt.data.tokenize.WordTokenizer` then asks it for words and text
(:func:`current`); the very code it runs in-process, so the same tokens. Where the worker is
not running, or cannot answer (it failed, or died), the tokenizer does the work itself, with
its errors as ever. Nothing else uses it: training, ``mt serve`` and the Python API tokenize
in-process.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import logging
import os
import pickle
import select
import subprocess
import sys
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

_worker: WordWorker | None = None
ANSWER_WITHIN_S = 60  # the first answer waits for spaCy's import (~1 s on a 2-core VM)


def current() -> WordWorker | None:
    """The running worker, if ``mt`` started one."""
    return _worker


def start_for(checkpoint: str | Path) -> None:
    """Start the worker for ``checkpoint``'s languages if it is a word (spaCy) model and there
    is a core to spare; otherwise (or if anything is odd) do nothing."""
    global _worker
    if _worker is not None or (os.cpu_count() or 1) < 2:
        return
    data = peek_data_config(checkpoint)
    if not data or data.get("tokenizer", "spacy") != "spacy":
        return
    langs = [data.get("src_lang"), data.get("tgt_lang")]
    if not all(isinstance(lang, str) and lang.isidentifier() for lang in langs):
        return
    _worker = WordWorker([str(lang) for lang in langs])
    atexit.register(_worker.close)


class WordWorker:
    """The worker process (:func:`main`) and one JSON request and answer a line each way."""

    def __init__(self, langs: Sequence[str]) -> None:
        code = ("import gc, sys; gc.disable(); sys.modules['torch'] = None; "  # (main())
                "from transformer_mt.data.word_worker import main; main(sys.argv[1:])")
        # a session of its own: a Ctrl-C at the terminal is mt's to handle (the worker ends
        # when its input closes, as mt exits, however it exits)
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, *langs], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, encoding="utf-8",
            start_new_session=True)
        self.lock = threading.Lock()

    def ask(self, request: dict[str, Any]) -> Any | None:
        """The answer to ``request``, or None where the worker cannot give one (it failed, or
        is gone): the caller then does the work itself."""
        with self.lock:
            if self.process.poll() is not None:
                return None
            stdin, stdout = self.process.stdin, self.process.stdout
            assert stdin is not None and stdout is not None
            try:
                stdin.write(json.dumps(request) + "\n")
                stdin.flush()
                if not select.select([stdout], [], [], ANSWER_WITHIN_S)[0]:
                    raise TimeoutError(f"no answer in {ANSWER_WITHIN_S} s")
                answer = json.loads(stdout.readline() or "{}")
            except (OSError, ValueError) as exc:
                log.debug("the word worker did not answer (%s)", exc)
                self.process.kill()
                return None
        if not isinstance(answer, dict) or "result" not in answer:
            log.debug("the word worker could not answer: %s", answer)
            return None
        return answer["result"]

    def close(self) -> None:
        """End the worker (it ends by itself when its input closes)."""
        if self.process.poll() is None:
            try:
                assert self.process.stdin is not None
                self.process.stdin.close()
                self.process.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()


def main(langs: Sequence[str]) -> None:
    """The worker process (:class:`WordWorker`'s command, which stops the collector as it
    starts): :func:`serve`, its tokenizers made while the collector waits (as ``mt`` starts)."""
    from transformer_mt.__main__ import collector_waiting

    with collector_waiting():  # spaCy and sacremoses, unscanned
        _prepare(langs)
    serve(langs)


def _prepare(langs: Sequence[str]) -> None:
    """The tokenizers of ``langs``, made before the first request (each made once)."""
    from transformer_mt.data import words

    for lang in langs:
        for prepare in (words.spacy_tokenizer, words.moses_detokenizer):
            with contextlib.suppress(Exception):  # asked for, it answers with the error
                prepare(lang)


def serve(langs: Sequence[str], stdin: IO[str] = sys.stdin,
          stdout: IO[str] = sys.stdout) -> None:
    """The worker: get the tokenizers of ``langs`` ready, then answer ``{"op": "words",
    "lang": L, "texts": [...], "mark_hyphens": B}`` (each text's words) and ``{"op": "text",
    "lang": L, "tokens": [...]}`` (the words put back together) until its input closes."""
    from transformer_mt.data import words

    _prepare(langs)  # what the first request needs, before it comes
    for line in stdin:
        try:
            request = json.loads(line)
            if request["op"] == "words":
                result: Any = list(words.spacy_words(request["lang"], request["texts"],
                                                     bool(request.get("mark_hyphens"))))
            else:
                result = words.written(request["lang"], request["tokens"])
            answer = {"result": result}
        except Exception as exc:  # the caller does the work itself, and says
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()


def peek_data_config(checkpoint: str | Path) -> dict[str, Any] | None:
    """The ``data`` settings in a checkpoint, read without torch (which is not imported yet)
    and without building anything but plain values (tensors read as None); None if the file is
    not such a checkpoint."""
    try:
        with zipfile.ZipFile(checkpoint) as archive:
            name = next(n for n in archive.namelist() if n.endswith("/data.pkl"))
            ckpt = _PlainUnpickler(io.BytesIO(archive.read(name))).load()
        data = ckpt["config"]["data"]
        return data if isinstance(data, dict) else None
    except Exception:  # a hint only: loading the checkpoint says what is wrong
        return None


class _PlainUnpickler(pickle.Unpickler):
    """Builds dicts, lists, strings and numbers; torch's tensors and storages as None; refuses
    every other class."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "collections" and name == "OrderedDict":
            return dict
        if module == "torch" or module.startswith("torch."):
            return _nothing
        raise pickle.UnpicklingError(f"{module}.{name} is not read here")

    def persistent_load(self, pid: Any) -> None:
        return None


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None
