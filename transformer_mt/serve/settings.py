"""The server's settings, each declared once: its default and, where ``mt serve`` takes it as
a flag, the flag, its lowest value and its help. The parser, the check of what was typed and
the settings the server runs with are all made from these declarations (``cli/serve.py``).
Nothing here imports the server's packages: ``mt --help`` works without them."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformer_mt.serve.watched_file import WatchedFile

LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")


def flag(default: float, name: str, lowest: float, help: str, above: bool = False) -> Any:
    """A setting ``mt serve`` takes as ``name``: a number of ``default``'s type, at least
    ``lowest`` (``above``: more than it)."""
    return field(default=default, metadata={"flag": name, "lowest": lowest, "above": above,
                                            "help": help})


@dataclass
class Limits:
    """What one request may ask for."""

    max_body_bytes: int = flag(1_000_000, "--max-body-bytes", 1, "request body size")
    max_sentences: int = flag(128, "--max-sentences", 1,
                              "sentences per request (texts split into sentences)")
    max_chars: int = flag(5_000, "--max-chars", 1, "characters per text")
    max_file_chars: int = flag(100_000, "--max-file-chars", 1,
                               "characters per file to /translate_file")
    timeout_s: float = flag(60.0, "--timeout", 0, "seconds a request may take (queue and "
                            "decoding), else 504", above=True)
    max_beam: int = 32
    max_topk: int = 20
    max_alternatives: int = 8
    # 'attention', 'topk' and 'beam_steps' answers: numbers per request, at most
    max_inspect_values: int = 2_000_000


@dataclass
class ServeOptions:
    """How the server batches, what it accepts, and what it says about the model."""

    limits: Limits = field(default_factory=Limits)
    api_keys: tuple[str, ...] = ()  # clients must send one of these; none: no key needed
    batch_tokens: int = flag(4096, "--batch-tokens", 1,
                             "a batch closes at this many source tokens ...")
    max_wait_ms: float = flag(10.0, "--max-wait-ms", 0, "... or this long after its first "
                              "request")
    max_queue: int = flag(256, "--max-queue", 1,
                          "requests waiting for the decoder; beyond, 429")
    batching: bool = True  # False: each request decoded alone
    engine: str = "torch"
    about: dict[str, Any] = field(default_factory=dict)  # step, validation score, ...
    allowed_hosts: tuple[str, ...] = LOCAL_HOSTS  # Host (and Origin) names answered; "*": any
    cors_origins: tuple[str, ...] = ()  # web pages elsewhere that may call the API; "*": any
    rate_limit: int = flag(0, "--rate-limit", 0, "requests a minute per client (its key "
                           "where keys are checked, else its address); 0: none")
    char_rate_limit: int = flag(0, "--char-rate-limit", 0,
                                "characters a minute per client; 0: none")
    cache_size: int = flag(10_000, "--cache-size", 0, "translated sentences kept in memory, "
                           "each counted per 64 output tokens of its n-best (memory ~100 bytes "
                           "a token); 0: none")
    body_timeout_s: float = flag(30.0, "--body-timeout", 0, "seconds a request's body has to "
                                 "arrive, else 408", above=True)
    # proxies whose X-Forwarded-For names the client; none: a client is the peer's address
    forwarded_allow_ips: tuple[str, ...] = ()
    run_dir: str | None = None  # a training run whose checkpoints /v1/run reads
    shared_storage: str | None = None  # redis://...: limits and cache shared (serve/storage.py)
    model_id: str = ""  # names the model's translations in a shared cache
    suggestions: str | None = None  # the SQLite file /suggest keeps corrections in; None: off
    files_dir: str | None = None  # where translated files wait (its workers' one); None: its own
    glossary_file: WatchedFile | None = None  # --glossary's file, read again when it changes
    memory_file: WatchedFile | None = None  # --memory's, too


@dataclass
class Connections:
    """Where the server listens, in how many processes, how long a connection may be slow or
    idle, and how long a stop waits."""

    port: int = flag(8000, "--port", 1, "the port to listen on (at most 65535)")
    workers: int = flag(1, "--workers", 1, "server processes, each with its model, sharing "
                        "the port and the CPU's cores (--shared-storage to share limits and "
                        "cache too)")
    header_timeout_s: float = flag(10.0, "--header-timeout", 0, "seconds a connection has to "
                                   "send a request's headers", above=True)
    idle_timeout_s: int = flag(5, "--idle-timeout", 0, "seconds an idle kept-alive connection "
                               "stays open", above=True)
    max_connections: int = flag(512, "--max-connections", 1,
                                "connections served at once; beyond, 503")
    grace_s: float = flag(30.0, "--grace", 0, "on SIGTERM, seconds the requests in flight get "
                          "to finish")


FLAGGED = (Connections, ServeOptions, Limits)  # in --help's order


def flagged() -> list[dataclasses.Field[Any]]:
    """Every setting ``mt serve`` takes as a flag."""
    return [f for kind in FLAGGED for f in dataclasses.fields(kind) if "flag" in f.metadata]


def dest(setting: dataclasses.Field[Any]) -> str:
    """The setting's attribute in the parsed arguments."""
    return str(setting.metadata["flag"])[2:].replace("-", "_")


def given(kind: type, args: argparse.Namespace) -> dict[str, Any]:
    """The settings of ``kind`` (one of :data:`FLAGGED`) as the flags gave them."""
    return {f.name: getattr(args, dest(f)) for f in dataclasses.fields(kind)
            if "flag" in f.metadata}
