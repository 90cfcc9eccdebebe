"""``mt serve``'s command line: its flags (the numeric ones made from ``serve/settings.py``
and checked here), the key file, and starting the server. Nothing here imports the server's
packages until it runs."""

from __future__ import annotations

import argparse
import hashlib
import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from transformer_mt.errors import MTError
from transformer_mt.fileio import not_a_file, not_an_input, open_input
from transformer_mt.serve.settings import (
    LOCAL_HOSTS,
    Connections,
    Limits,
    ServeOptions,
    dest,
    flagged,
    given,
)

if TYPE_CHECKING:
    from transformer_mt.serve.watched_file import Kind, WatchedFile
    from transformer_mt.translate import Translator
    from transformer_mt.translate.glossary import Glossary
    from transformer_mt.translate.memory import Memory


log = logging.getLogger(__name__)

def add(sub: Any, common: argparse.ArgumentParser) -> None:
    """``mt serve``'s arguments."""
    from transformer_mt.cli.flags import add_decoding_flags, add_engine_flags

    p = sub.add_parser("serve", parents=[common],
                       help="a translation server: JSON API, LibreTranslate API and a web page")
    p.add_argument("--checkpoint", required=True, action="append",
                   help="checkpoint (.pt; repeat for an ensemble) or exported model directory")
    add_engine_flags(p)
    add_decoding_flags(p)  # what a request that names none decodes with
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (0.0.0.0: every interface)")
    p.add_argument("--api-key-file", help="a file holding the key(s) clients must send, "
                   "one a line")
    p.add_argument("--allowed-host", action="append", metavar="NAME",
                   help="a host name clients use to reach the server (repeatable; '*': any); "
                   "default: localhost, 127.0.0.1, ::1 and --host")
    p.add_argument("--cors-origin", action="append", metavar="ORIGIN",
                   help="a web page's origin (https://example.org) allowed to call the API "
                   "from a browser (repeatable; '*': any); default: none")
    p.add_argument("--forwarded-allow-ips", action="append", metavar="IP",
                   help="a proxy in front of the server (repeatable; '*': any) whose "
                   "X-Forwarded-For names the client that rate limits count; default: none")
    p.add_argument("--no-batching", action="store_true", help="decode each request alone")
    p.add_argument("--run-dir", help="a run directory of mt train whose checkpoints the page "
                   "shows a sentence across (default: the served checkpoint's directory)")
    p.add_argument("--shared-storage", metavar="URI", help="redis://HOST:PORT/DB: the rate "
                   "limits and the translation cache in Redis, shared by every server process "
                   "and machine using it (pip install 'transformer_mt[shared]'); default: in "
                   "this process's memory")
    p.add_argument("--suggestions", metavar="FILE", help="an SQLite file (made if need be) "
                   "that POST /suggest keeps users' corrected translations in, for "
                   "fine-tuning on (data.train: [{suggestions: FILE}]); default: /suggest off")
    p.add_argument("--compare", metavar="CHECKPOINT", help="a second checkpoint (.pt) the page "
                   "compares the served model with")
    p.add_argument("--glossary", metavar="FILE", help="terms every translation the server "
                   "makes must hold, on every route (LibreTranslate's and files too): 'source "
                   "term<TAB>target term[<TAB>word to avoid...]' lines or a termbase (.tbx), "
                   "as mt translate's; a "
                   "request's own glossary (/v1/translate) goes over it; read again when "
                   "the file changes")
    p.add_argument("--memory", metavar="FILE", help="translations every route uses as they "
                   "are: a sentence the memory holds is translated as it says (mt translate's "
                   "--memory: a .tmx or 'source<TAB>translation' lines); read again when the "
                   "file changes")
    for setting in flagged():  # serve/settings.py: each declared there, with its default
        p.add_argument(setting.metadata["flag"], type=type(setting.default),
                       default=setting.default, help=setting.metadata["help"])
    p.set_defaults(func=cmd_serve)


def _check_numbers(args: argparse.Namespace) -> None:
    """Each numeric flag a finite number in its range."""
    for setting in flagged():
        flag, low, above = (setting.metadata[k] for k in ("flag", "lowest", "above"))
        value = getattr(args, dest(setting))
        if not (math.isfinite(value) and (value > low if above else value >= low)):
            bound = f"more than {low:g}" if above else f"at least {low:g}"
            raise MTError(f"{flag} must be a finite number {bound}, not {value:g}")


def _api_keys(path: str | None) -> tuple[str, ...]:
    """The keys in ``path``: one a line (blank lines and '#' comments skipped)."""
    if not path:
        return ()
    why = not_an_input(Path(path))  # a pipe too: --api-key-file <(pass show mt)
    if why:
        raise MTError(f"--api-key-file '{path}' {why}")
    try:
        with open_input(Path(path)) as f:
            text = f.read().decode("utf-8")
    except UnicodeDecodeError:
        raise MTError(f"--api-key-file '{path}' is not UTF-8 text; write the key(s) in it, "
                      "one a line") from None
    keys = tuple(line.strip() for line in text.splitlines()
                 if line.strip() and not line.strip().startswith("#"))
    if not keys:
        raise MTError(f"--api-key-file '{path}' holds no key; put the key(s) in it, one a line")
    for n, key in enumerate(keys):
        if not (key.isascii() and key.isprintable()):  # a header carries no other key
            raise MTError(f"--api-key-file '{path}': key {n + 1} is not printable ASCII, which "
                          "no client can send in a header; use letters, digits and - _ . ~")
    return keys


def _glossary(args: argparse.Namespace) -> Glossary | None:
    """``--glossary`` read (a bad line: one line of error), or None; ``args.terms_file``: the
    file to read again when it changes. (``--keep-spans`` sets what a request that says
    nothing keeps, ``_load``; asked for, it needs our engine as a glossary does.)"""
    if args.engine != "torch" and (args.glossary or args.keep_spans):
        raise MTError("--glossary and --keep-spans need a PyTorch checkpoint (.pt): "
                      "CTranslate2 cannot constrain its search")
    from transformer_mt.serve.watched_file import counted

    glossary, args.terms_file = _watched(args, "glossary")
    if glossary is not None:
        log.info("every translation holds the %s of %s", counted(glossary, "glossary"),
                 args.glossary)
    return cast("Glossary | None", glossary)


def _memory(args: argparse.Namespace) -> Memory | None:
    """``--memory`` read (as ``_glossary``: ``args.memory_file``), or None."""
    from transformer_mt.serve.watched_file import counted

    memory, args.memory_file = _watched(args, "memory")
    if memory is not None:
        log.info("a sentence of the %s of %s is translated as it says",
                 counted(memory, "memory"), args.memory)
    return cast("Memory | None", memory)


def _watched(args: argparse.Namespace, kind: Kind) -> tuple[Any, WatchedFile | None]:
    """The file of ``--glossary`` or ``--memory`` read in the model's languages (before the
    model loads), and the file to watch; (None, None) where none is given."""
    from transformer_mt.serve.watched_file import WatchedFile
    from transformer_mt.translate.user_files import file_languages

    path = getattr(args, kind)
    return WatchedFile.read(kind, path, file_languages(path, args.checkpoint[0])) if path \
        else (None, None)


def _load(args: argparse.Namespace) -> tuple[Translator, dict, Translator | None]:
    """The translator, what /v1/info says of it (step, best BLEU, names), and the model to
    compare it with (``--compare``)."""
    from transformer_mt.config import per_call_settings
    from transformer_mt.translate import Translator
    from transformer_mt.translate.glossary import SAMPLED

    translator = Translator.load(args.checkpoint, args.device, args.engine, args.compile)
    decode = translator.settings(**{f.name: getattr(args, f.name) for f in per_call_settings()})
    if decode.samples and args.terms:  # (every request would be refused)
        raise MTError(f"{SAMPLED}: drop --glossary, or --sample-topk and --top-p")
    if decode != translator.config.decode or args.terms or args.remembered:  # what a request
        translator = translator.with_settings(decode, args.terms, args.remembered)  # that
        # names none gets
    if (args.engine == "torch" and not args.compile and len(args.checkpoint) == 1
            and translator.device.type == "cpu"):
        log.info("decoding eagerly: --compile answers a lone request ~4x faster on a CPU "
                 "(it compiles once, about a minute, then loads from its cache)")
    about: dict = {}
    if args.engine == "torch" and len(args.checkpoint) == 1:
        from transformer_mt.checkpoint import load_checkpoint

        progress = load_checkpoint(args.checkpoint[0]).get("progress", {})
        about = {"step": progress.get("step"), "best_val_bleu": progress.get("best_bleu"),
                 "checkpoint": _name(args.checkpoint[0])}
    compare = None
    if args.compare:
        compare = Translator.load(args.compare, args.device)
        about["compare"] = _name(args.compare)
    return translator, about, compare


def _name(path: str) -> str:
    """A checkpoint as the page names it: its directory and file (``quickstart/best.pt``)."""
    return "/".join(Path(path).resolve().parts[-2:])


def _model_id(args: argparse.Namespace) -> str:
    """What names the served model in a shared cache: its files' bytes and the engine (servers
    of other models, or engines, never read each other's translations)."""
    from transformer_mt.fileio import sha256_of

    digest = hashlib.sha256(args.engine.encode())
    for checkpoint in args.checkpoint:
        path = Path(checkpoint)
        for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if file.is_file():
                digest.update(sha256_of(file).encode())
    return digest.hexdigest()[:16]


def _run_dir(args: argparse.Namespace) -> str | None:
    """``--run-dir``, checked; by default the directory of a lone .pt checkpoint served."""
    if args.run_dir:
        from transformer_mt.serve.inside import run_checkpoints

        if not Path(args.run_dir).is_dir() or not run_checkpoints(args.run_dir):
            raise MTError(f"--run-dir '{args.run_dir}' is not a run directory of mt train "
                          "(no kept_*.pt, step_*.pt or best.pt in it)")
        return str(args.run_dir)
    if args.engine == "torch" and len(args.checkpoint) == 1 and \
            Path(args.checkpoint[0]).suffix == ".pt":
        return str(Path(args.checkpoint[0]).parent)
    return None


def cmd_serve(args: argparse.Namespace) -> int:
    from transformer_mt.device import pick_device

    _check_numbers(args)
    from transformer_mt.translate.engines import engine_for

    args.engine = engine_for(args.checkpoint, args.engine)  # what "auto" is for this model
    if args.port > 65535:
        raise MTError("--port must be at most 65535")
    try:
        from transformer_mt.serve.batcher import decoder_thread
        from transformer_mt.serve.server import bind, serve
    except ModuleNotFoundError as exc:
        from transformer_mt.packages import missing_error

        raise missing_error([str(exc.name).split(".")[0]], ["mt serve"]) from exc
    if getattr(args, "api_keys", None) is None:  # read once: --workers' processes get them
        args.api_keys = _api_keys(args.api_key_file)  # (a pipe cannot be read again)
    if getattr(args, "terms", None) is None:  # so are these, before the model loads
        args.terms, args.remembered = _glossary(args), _memory(args)
    run_dir = _run_dir(args)
    if args.suggestions:  # a file that cannot keep them: refused before the model loads
        from transformer_mt.data.suggestions import SuggestionStore

        SuggestionStore(args.suggestions).close()
    if args.compare and not_a_file(Path(args.compare)):
        raise MTError(f"--compare '{args.compare}' {not_a_file(Path(args.compare))}")
    pick_device(args.device)  # a bad name: one line, before the model loads
    if args.workers > 1 and getattr(args, "socket", None) is None:  # this process: theirs
        from transformer_mt.serve.workers import run_workers

        return run_workers(args)
    if getattr(args, "socket", None) is None:  # a port taken: said before the model loads
        bind(args.host, args.port).close()  # (bound again once warmed up: serve())
    # loaded on the thread that will decode with it (serve/batcher.py: decoder_thread)
    translator, about, compare = decoder_thread().submit(_load, args).result()
    hosts = tuple(args.allowed_host or ()) or (
        LOCAL_HOSTS if args.host in ("127.0.0.1", "localhost", "::1", "0.0.0.0", "::")
        else (*LOCAL_HOSTS, args.host))
    options = ServeOptions(
        limits=Limits(**given(Limits, args)), **given(ServeOptions, args), api_keys=args.api_keys,
        batching=not args.no_batching, engine=args.engine, about=about, allowed_hosts=hosts,
        cors_origins=tuple(args.cors_origin or ()),
        forwarded_allow_ips=tuple(args.forwarded_allow_ips or ()), run_dir=run_dir,
        suggestions=args.suggestions, shared_storage=args.shared_storage,
        files_dir=getattr(args, "files_dir", None), glossary_file=args.terms_file,
        memory_file=args.memory_file,
        model_id=_model_id(args) if args.shared_storage else "")
    if args.host in ("0.0.0.0", "::") and not args.allowed_host:
        log.warning("listening on every interface, but answering only requests addressed to "
                    "localhost: add --allowed-host NAME (the name clients use) or '*'")
    serve(translator, options, args.host, Connections(**given(Connections, args)), compare,
          getattr(args, "socket", None))
    return 0
