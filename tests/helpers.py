"""What the tests share: where the repository and Multi30k are, running ``mt`` as a user
does (``run_cli``), a tiny training's arguments (on the toy German -> English corpus of
tests/data/toy-de-en), a toy French -> Spanish corpus in files, and a test client for the
server. (The fixtures are in conftest.py; the toy reversal task and its
model in toy.py.)"""

from __future__ import annotations

import contextlib
import gzip
import io
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def _data_dir() -> Path | None:
    for candidate in (os.environ.get("MT_DATA_DIR"), REPO.parent / "shared/data/multi30k"):
        if candidate and (Path(candidate) / "train.de.gz").is_file():
            return Path(candidate).resolve()
    return None


DATA_DIR = _data_dir()
needs_data = pytest.mark.skipif(DATA_DIR is None, reason="Multi30k not found (set MT_DATA_DIR)")


TOY_DE_EN = REPO / "tests" / "data" / "toy-de-en"  # made up from templates (make.py there)


def billion_laughs(root: str) -> bytes:
    """An XML document, ``root`` as its element, whose entity ``&lol9;`` (in ``root``)
    expands to 10^9 "lol"s: billion laughs, as a hostile file holds it."""
    entities = "".join(f'<!ENTITY lol{i} "{(f"&lol{i - 1};" if i > 1 else "&lol;") * 10}">'
                       for i in range(1, 10))
    return f'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">{entities}]>{root}'.encode()


def toy_corpus(split: str) -> str:
    """A split of the toy German -> English corpus as a ``--set`` value (a corpus mapping)."""
    return f"{{src: '{TOY_DE_EN / split}.de', tgt: '{TOY_DE_EN / split}.en'}}"


# a tiny run learns the toy German -> English corpus: no download needed
TINY_OVERRIDES = [
    f"data.train={toy_corpus('train')}", f"data.valid={toy_corpus('valid')}",
    f"data.test={{toy_test: {toy_corpus('test')}}}",
    "data.max_pairs=300", "data.valid_max_pairs=20", "data.min_freq=1", "train.lr=1e-3",
    "model.d_model=32", "model.n_heads=2", "model.n_encoder_layers=1",
    "model.n_decoder_layers=1", "model.d_ff=64", "model.max_positions=128",
    "train.max_tokens=600", "train.max_steps=6", "train.warmup_steps=2", "train.log_every=1",
    "train.eval_every=3", "train.save_every=3", "train.precision=fp32", "train.threads=1",
    "decode.beam_size=1", "decode.batch_size=16", "decode.no_repeat_ngram_size=0",
]


def tiny_train_args(run_dir, *overrides: str) -> list[str]:
    """``mt train`` arguments for a tiny run of config/quickstart.yaml on the toy German ->
    English corpus, in ``run_dir``."""
    sets = [arg for o in [*TINY_OVERRIDES, *overrides] for arg in ("--set", o)]
    return ["train", "--config", "config/quickstart.yaml", "--run-dir", str(run_dir), *sets]


def run_cli(args: list[str], cwd: Path | None = None, timeout: int = 300,
            env: dict[str, str] | None = None, stdin: str | bytes | None = None,
            fresh_process: bool = False) -> subprocess.CompletedProcess:
    """Run ``mt ARGS`` and return a CompletedProcess (exit code, stdout, stderr).

    In this process by default (``cli.main(argv)``, with its own working directory, variables,
    standard input and captured output: what a user sees, at a fraction of a start-up's cost);
    ``fresh_process=True`` starts ``python -m transformer_mt`` for the tests that need one.
    """
    text = not isinstance(stdin, bytes)
    if fresh_process:
        full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
        return subprocess.run([sys.executable, "-m", "transformer_mt", *args], cwd=cwd or REPO,
                              capture_output=True, text=text, timeout=timeout, env=full_env,
                              input=stdin)
    return _run_in_process(args, cwd or REPO, env or {}, stdin, text)


def in_the_foreground() -> None:
    """``preexec_fn`` of a process a test interrupts as Ctrl-C does: SIGINT as a terminal's
    foreground process has it (Python's KeyboardInterrupt), wherever the suite runs. A shell
    starts a job in the background (``make test &``, nohup) with SIGINT ignored, and each
    process it starts keeps it so: ``mt translate`` then rightly ignores a SIGINT."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_bench(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python ARGS`` from the repository (a benchmark, as its docstring says to run it),
    which must exit 0."""
    result = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                            timeout=timeout)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


def _run_in_process(args: list[str], cwd: Path, env: dict[str, str], stdin: str | bytes | None,
                    text: bool) -> subprocess.CompletedProcess:
    import contextlib
    import io
    import traceback

    from transformer_mt import cli

    data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
    out, err = io.StringIO(), io.StringIO()
    saved_env = {key: os.environ.get(key) for key in env}
    saved = (os.getcwd(), sys.stdin, torch.get_num_threads())
    os.environ.update(env)
    os.chdir(cwd)
    sys.stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(args))
            except SystemExit as exc:  # argparse: --help, --version, usage errors
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except Exception:  # what a fresh process would print before exiting with 1
                traceback.print_exc()
                code = 1
    finally:
        os.chdir(saved[0])
        sys.stdin = saved[1]
        torch.set_num_threads(saved[2])
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    stdout, stderr = out.getvalue(), err.getvalue()
    if not text:
        return subprocess.CompletedProcess(args, code, stdout.encode(), stderr.encode())
    return subprocess.CompletedProcess(args, code, stdout, stderr)


# A toy French -> Spanish corpus: every combination of subject, colour and verb.
SUBJECTS = [("le chat", "el gato"), ("le chien", "el perro"), ("le cheval", "el caballo"),
            ("l'oiseau", "el pájaro"), ("le garçon", "el niño"), ("l'homme", "el hombre")]
COLOURS = [("noir", "negro"), ("blanc", "blanco"), ("rouge", "rojo"), ("vert", "verde"),
           ("gris", "gris")]
VERBS = [("mange", "come"), ("dort", "duerme"), ("court", "corre"), ("saute", "salta"),
         ("chante", "canta"), ("joue", "juega")]


def toy_corpus_pairs() -> list[tuple[str, str]]:
    pairs = []
    for (s_fr, s_es), (c_fr, c_es), (v_fr, v_es) in itertools.product(SUBJECTS, COLOURS, VERBS):
        pairs.append((f"{s_fr.capitalize()} {c_fr} {v_fr}.", f"{s_es.capitalize()} {c_es} {v_es}."))
    return pairs  # 180 pairs


def write_corpus(directory, form: str) -> dict:
    """The toy corpus as a data section: ``pair`` (two .gz files) or ``tsv`` (one file)."""
    directory.mkdir(parents=True, exist_ok=True)
    pairs = toy_corpus_pairs()
    train, valid = pairs, pairs[::9]
    out = {}
    for name, rows in (("train", train), ("valid", valid)):
        if form == "tsv":
            path = directory / f"{name}.tsv"
            path.write_text("".join(f"{a}\t{b}\n" for a, b in rows), encoding="utf-8")
            out[name] = {"tsv": str(path)}
        else:
            for lang, column in (("fr", 0), ("es", 1)):
                with gzip.open(directory / f"{name}.{lang}.gz", "wt", encoding="utf-8") as f:
                    f.writelines(row[column] + "\n" for row in rows)
            out[name] = {"src": str(directory / f"{name}.fr.gz"),
                         "tgt": str(directory / f"{name}.es.gz")}
    return {"src_lang": "fr", "tgt_lang": "es", **out, "min_freq": 1, "max_len": 40}


TINY = {"model": {"d_model": 64, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1,
                  "d_ff": 128, "max_positions": 64, "dropout": 0.0},
        "train": {"max_tokens": 300, "max_steps": 200, "warmup_steps": 20, "lr": 5e-3,
                  "log_every": 10, "eval_every": 50, "save_every": 50, "precision": "fp32",
                  "threads": 1, "keep_last": 0},
        "decode": {"beam_size": 1}}


def write_config(path, data: dict, **sections) -> None:
    config = {"name": "toy", "data": data, **TINY}
    for key, value in sections.items():
        config[key] = {**config.get(key, {}), **value}
    path.write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML


def train_toy(directory, form: str, **data_changes) -> tuple:
    """Train the toy model on a corpus of ``form`` in ``directory``: (run_dir, data section)."""
    data = {**write_corpus(directory / "corpus", form), **data_changes}
    write_config(directory / "toy.yaml", data)
    run_dir = directory / "run"
    result = run_cli(["train", "--config", str(directory / "toy.yaml"), "--run-dir",
                      str(run_dir)])
    assert result.returncode == 0, result.stderr
    return run_dir, data


def translate_elsewhere(checkpoint, directory, *sentences: str) -> list[str]:
    """Translate with a copy of the checkpoint, from a directory that holds nothing else."""
    directory.mkdir()
    shutil.copy(checkpoint, directory / "model.pt")
    result = run_cli(["translate", "--checkpoint", "model.pt", *sentences], cwd=directory,
                     env={"PYTHONPATH": str(REPO)})
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def writing_unk(checkpoint: Path, sentence: str, out: Path) -> Path:
    """``checkpoint`` made to write ``<unk>`` wherever it would write its first word for
    ``sentence`` (that row of the output projection, doubled, as ``<unk>``'s), saved as
    ``out``: a real model whose outputs hold words to copy from the source."""
    import torch

    from transformer_mt.data.vocab import UNK_ID
    from transformer_mt.translate import Translator

    [[first]] = Translator.load(checkpoint, "cpu").translate(
        [sentence], nbest=1, beam_size=1, replace_unk=False)
    stored = torch.load(checkpoint, weights_only=True)
    weight = stored["model"]["decoder.project.weight"]
    weight[UNK_ID] = 2 * weight[first.ids[0]]
    torch.save(stored, out)
    return out


def a_tested_version(package: str, tested: tuple[str, ...]) -> bool:
    """Whether the installed ``package`` is one of the ``major.minor`` versions an adapter of
    transformer_mt/internals/ was tested on (``TESTED``; elsewhere its plain fallback runs)."""
    from importlib.metadata import version

    return ".".join(version(package).split("+")[0].split(".")[:2]) in tested


def local_client(app: Any) -> Any:
    """A test client (FastAPI's) that addresses the server as localhost (the Host it answers
    to)."""
    from fastapi.testclient import TestClient

    return TestClient(app, base_url="http://localhost")


# ---------------------------------------------------------------- mt serve's page

def open_page(browser: Any, url: str, **viewport: int) -> tuple[Any, list[str]]:
    """mt serve's page at ``url`` in a new tab of ``browser`` (Playwright's), once it has
    read ``/v1/info``; and the errors its scripts, console and requests report, as they come."""
    page = browser.new_page(viewport=viewport or {"width": 1000, "height": 900})
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("requestfailed", lambda r: problems.append(f"{r.url} failed"))
    page.goto(url + "/")
    page.wait_for_function("document.getElementById('about').textContent.includes('heads')")
    return page, problems


def translate_on_page(page: Any, text: str) -> None:
    """``text`` typed into the page and translated: its first row's tokens and steps shown."""
    page.fill("#source", text)
    page.click("#translate")
    page.wait_for_selector("#row-0 .tok", timeout=60_000)
    page.wait_for_selector("#steps tr", timeout=60_000)


def page_tokens(page: Any) -> list[str]:
    """The tokens of the page's first translation, as shown."""
    return page.eval_on_selector_all("#row-0 .tok", "xs => xs.map(x => x.textContent)")


def slide(page: Any, slider: str, value: float) -> None:
    """The page's ``slider`` moved to ``value``, as a hand moves it (input, then change)."""
    page.eval_on_selector(f"#{slider}", """(s, v) => { s.value = v;
        s.dispatchEvent(new Event('input')); s.dispatchEvent(new Event('change')); }""", value)

# ---------------------------------------------------------------- mt serve in a process

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def assert_serving(client: Any) -> None:
    """The server (a test client of the app) still answers, and still translates."""
    assert client.get("/health").json() == {"status": "ok"}
    assert client.post("/v1/translate", json={"text": ["Ein Hund."]}).status_code == 200


def start_server(checkpoint: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    """``mt serve`` in its own process; returns it and its base URL once /health says ready.

    The port is a free one when asked for, but another process may take it before the server
    binds it (it tries as it starts, and binds after its warm-up: the suite starts servers in
    two processes at once), and that process's server would then answer /health: the server
    must be the one listening, and one that could not bind is started again on another
    port."""
    for _ in range(3):
        port = free_port()
        proc = subprocess.Popen([sys.executable, "-m", "transformer_mt", "serve",
                                 "--checkpoint", str(checkpoint), "--device", "cpu", "--port",
                                 str(port), *extra], cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONUNBUFFERED="1"))
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                out, err = proc.communicate()
                assert "address already in use" in err.lower(), (out, err)
                break  # another process took the port: again, on another one
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    if json.load(r)["status"] == "ok" and _listens(proc.pid, port) is not False:
                        return proc, url
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        else:
            proc.kill()
            break
    raise AssertionError("the server did not become ready")


def _listens(pid: int, port: int) -> bool | None:
    """Whether process ``pid`` listens on the localhost TCP ``port`` (Linux's /proc); None
    where that cannot be told."""
    try:
        with open("/proc/net/tcp", encoding="ascii") as f:
            inodes = {fields[9] for fields in (line.split() for line in f.readlines()[1:])
                      if fields[1].endswith(f":{port:04X}") and fields[3] == "0A"}  # LISTEN
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return None
    sockets = set()
    for fd in fds:
        with contextlib.suppress(OSError):  # (closed since: listdir's own, say)
            sockets.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    return any(f"socket:[{inode}]" in sockets for inode in inodes)


def post(url: str, body: dict, timeout: float = 120) -> tuple[int, dict]:
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def assert_servers_agree(a: str, b: str, sentence: str, limit: int = 4) -> None:
    """Two servers (base URLs) on one shared storage, each fresh, with ``--rate-limit``
    ``limit``: a sentence one translated is the other's cache hit, and this client's requests
    to either count towards one limit."""
    status, first = post(a + "/v1/translate", {"text": sentence})
    status_b, second = post(b + "/v1/translate", {"text": sentence})
    assert status == status_b == 200 and first == second
    with urllib.request.urlopen(b + "/metrics") as r:
        assert "mt_cache_hits_total 1.0" in r.read().decode()
    for n in range(2, limit):
        assert post((a, b)[n % 2] + "/v1/translate", {"text": "Ein Hund."})[0] == 200
    assert post(a + "/v1/translate", {"text": "Ein Hund."})[0] == 429  # over the limit
    assert post(b + "/v1/translate", {"text": "Ein Hund."})[0] == 429


def saved(save) -> bytes:
    """The bytes a document's ``save`` (python-docx's, python-pptx's, odfpy's ``write``)
    writes."""
    out = io.BytesIO()
    save(out)
    return out.getvalue()


def zipped_parts(data: bytes, folder: str = "word/") -> dict[str, Any]:
    """The XML members of a zipped document (a .docx, .pptx, .odt, ...) under ``folder``,
    parsed (lxml)."""
    from lxml import etree

    with zipfile.ZipFile(io.BytesIO(data)) as book:
        return {name: etree.fromstring(book.read(name)) for name in book.namelist()
                if name.startswith(folder) and name.endswith(".xml")}
