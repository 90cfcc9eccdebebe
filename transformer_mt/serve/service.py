"""What the routes share: the loaded translator, the options, the decoding worker, the
translation cache, the rate limits, API keys, the metrics and the checks of languages
(``language_checks.py``).

A request's texts become :class:`Prepared` sentences (split, those longer than the model
takes in parts, tokenized), are decoded by the worker (or found in the cache; those whose
translation lost their brackets or quotes again with them kept apart), and come back as
:class:`TextResult`\\ s that rebuild each text around its translations.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any, TypeVar

from transformer_mt.config import DecodeConfig
from transformer_mt.data.suggestions import SuggestionStore
from transformer_mt.data.vocab import EOS_ID, UNK_ID
from transformer_mt.errors import MTError
from transformer_mt.serve.batcher import Batcher, BatchStats, QueueFullError, StoppingError
from transformer_mt.serve.errors import RequestError
from transformer_mt.serve.file_store import FileStore
from transformer_mt.serve.language_checks import LanguageChecks, identifier
from transformer_mt.serve.metrics import Metrics
from transformer_mt.serve.settings import ServeOptions
from transformer_mt.serve.storage import Storage
from transformer_mt.serve.texts import Prepared, TextResult
from transformer_mt.translate import InputTooLongError, Translation, Translator
from transformer_mt.translate.documents import Document, TextForm
from transformer_mt.translate.glossary import Glossary, holding, steered
from transformer_mt.translate.inline import attention_links
from transformer_mt.translate.long_sentences import readable
from transformer_mt.translate.marks import apart, lost_marks
from transformer_mt.translate.unknown import copy_unknown

T = TypeVar("T")

log = logging.getLogger("transformer_mt.serve")

WARM_LENGTHS = 64  # source lengths (tokens) a lone request of which warm_up decodes once


class Service(LanguageChecks):
    def __init__(self, translator: Translator, options: ServeOptions,
                 compare: Translator | None = None) -> None:
        self.translator, self.options, self.limits = translator, options, options.limits
        self.compare = compare  # the second model of /v1/compare
        self.suggestions = SuggestionStore(options.suggestions) if options.suggestions else None
        self.files = FileStore(options.files_dir)  # /translate_file's, for their download
        self.src_lang = translator.config.data.src_lang
        self.tgt_lang = translator.config.data.tgt_lang
        self.metrics = Metrics()
        self.batcher: Batcher | None = None
        self.warm = False  # warm_up done
        self.storage = Storage(options.cache_size, options.shared_storage, options.model_id)
        self._preparing = ThreadPoolExecutor(1, thread_name_prefix="mt-prepare")

    # ------------------------------------------------------------------ lifetime

    def warm_up(self) -> None:
        """Pay now what the first request would pay once (~1 s for a word-level model: the
        sentence splitter and tokenizers, the source vocabulary's words met, the HTML parser,
        the decoding copy of the model, the detokenizer; the language identifier where it is
        installed; with ``--compile``, the compiled steps of a lone sentence and of a batch),
        so that the first request is answered as fast as the hundredth: a word of text
        translated, and two of HTML at once (a batch: the server batches requests); the word
        at a beam of 2 at least, where requests may ask for beams (a greedy server's compiled
        lone beams: else its first lone request of a beam would compile them)."""
        start = time.perf_counter()
        self.translator.tokenizers[0].prime(self.translator.src_vocab.itos)
        cfg = self.translator.settings()
        beams = cfg if cfg.samples or self.limits.max_beam < 2 else self.translator.settings(
            beam_size=max(cfg.beam_size, 2))
        forms: tuple[tuple[list[str], TextForm], ...] = ((["x."], "text"), (["x.", "y."], "html"))
        for texts, form in forms:
            for hyps in self.translator.engine.decode(self.prepare(texts, form).ids,
                                                      beams if form == "text" else cfg):
                self.translator.detokenize(self.translator.tgt_vocab.decode(hyps[0].tokens))
        # a lone source of each length up to WARM_LENGTHS, one output token each: a length's
        # first translation made oneDNN's kernels for its shapes (the encoder's products;
        # ~2.5-3 ms, +60 % for a lone sentence compiled), ~0.3 s for all of them here
        one_step = self.translator.settings(max_len_a=0.0, max_len_b=1)
        for length in range(1, min(WARM_LENGTHS, self.translator.max_source_tokens) + 1):
            self.translator.engine.decode([[EOS_ID + 1] * (length - 1) + [EOS_ID]], one_step)
        with contextlib.suppress(ImportError):
            identifier()
        self.warm = True
        log.info("warmed up in %.2f s", time.perf_counter() - start)

    def start(self) -> None:
        """Start the decoding worker (on the server's event loop)."""
        self.batcher = Batcher(self.translator, self.options.batch_tokens,
                               self.options.max_wait_ms / 1000, self.options.max_queue,
                               self.options.batching, BatchStats(self.metrics.on_batch),
                               self.limits.max_beam)
        self.metrics.queue_depth.set_function(self.batcher.waiting)

    async def stop(self) -> None:
        if self.batcher is not None:
            batcher, self.batcher = self.batcher, None
            await batcher.close()  # what is queued is finished first
        self.files.close()

    def worker(self) -> Batcher:
        if self.batcher is None:
            raise RequestError(503, "the server is starting or stopping; try again")
        return self.batcher

    # ------------------------------------------------------------------ keys and limits

    def key_ok(self, given: str | None) -> bool:
        """Whether ``given`` is one of the keys (compared in constant time), or none is set."""
        if not self.options.api_keys:
            return True
        ok = False
        for key in self.options.api_keys:
            ok |= hmac.compare_digest((given or "").encode("utf-8", "surrogatepass"),
                                      key.encode())
        return ok and given is not None

    def charge(self, client: str, characters: int) -> None:
        """Count a request of ``characters`` against ``client``'s limits (429 beyond them)."""
        from limits import RateLimitItemPerMinute

        for limit, name, cost in ((self.options.rate_limit, "requests", 1),
                                  (self.options.char_rate_limit, "characters", characters)):
            if limit and not self.storage.hit(RateLimitItemPerMinute(limit), client, name,
                                              max(cost, 1)):
                raise RequestError(429, f"Slowdown: at most {limit:,} {name} a minute from "
                                   "one client here; try again in a minute",
                                   {"Retry-After": "60"})

    # ------------------------------------------------------------------ translating

    async def prepare_off_loop(self, texts: list[str], form: TextForm,
                               max_sentences: int | None = None,
                               cfg: DecodeConfig | None = None) -> Prepared:
        """:meth:`prepare` on a thread of its own, one request at a time: splitting a large
        HTML request takes seconds, which the event loop (``/health``, every other request)
        does not wait for."""
        return await self.off_loop(self.prepare, texts, form, max_sentences, cfg)

    async def off_loop(self, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)`` on the thread that prepares requests, one at a time."""
        return await asyncio.get_running_loop().run_in_executor(self._preparing, work, *args)

    def prepare(self, texts: list[str], form: TextForm, max_sentences: int | None = None,
                cfg: DecodeConfig | None = None) -> Prepared:
        """Split ``texts`` into sentences and tokenize them (:meth:`prepared`)."""
        try:
            docs = [self.translator.split(t, form) for t in texts]
        except Exception as exc:  # a parser failing on odd input fails this request only
            raise RequestError(400, f"the text could not be read as "
                               f"{'text' if form == 'text' else form.upper()}: "
                               f"{str(exc).splitlines()[0] if str(exc) else exc}") from None
        return self.prepared(docs, max_sentences, cfg)

    def prepared(self, docs: Sequence[Document[Any]], max_sentences: int | None = None,
                 cfg: DecodeConfig | None = None) -> Prepared:
        """Split documents' sentences tokenized, those longer than the model takes (or than
        ``cfg`` has it translate whole) in parts (``long_sentences.py``): a 400 where they
        are more than ``max_sentences`` (default: the limit of a request). Every route's
        texts come here: ``mt serve --glossary``'s and ``--memory``'s files are read again here
        if they changed."""
        for watched in (self.options.glossary_file, self.options.memory_file):
            if watched is not None:
                watched.refresh(self.translator)
        docs = readable(self.translator, docs, cfg)
        sentences = [s for d in docs for s in d.sentences]
        most = self.limits.max_sentences if max_sentences is None else max_sentences
        if len(sentences) > most:
            raise RequestError(400, f"{len(sentences)} sentences in one request; at most "
                               f"{most} here: split it")
        try:
            ids = self.translator.encode(sentences, strict=True)
        except InputTooLongError as exc:
            raise RequestError(400, str(exc)) from None
        return Prepared(docs, ids)

    async def decode(self, prepared: Prepared, cfg: DecodeConfig, nbest: int,
                     waiting: Callable[[], Any] | None = None,
                     queued: Callable[[], None] = lambda: None,
                     remember: bool = True) -> list[TextResult]:
        """Translate the prepared sentences: from ``mt serve --memory`` (``remember``: not
        where the model's own are inspected), the cache, or by the worker. A seeded
        sampling request is decoded on its own (the same translation alone or among others),
        and, uncached, the sentences that hold a term of ``mt serve --glossary``; ``waiting``:
        completes if the client leaves (the decoding stops); ``queued``: called once the
        request is in the queue (or needs none)."""
        sampling = cfg.samples
        caching = not sampling and self.options.cache_size > 0
        key = json.dumps([asdict(cfg), nbest], sort_keys=True)
        found = self.remembered(prepared, remember)
        glossary = holding(self.translator, None, cfg)
        # spans kept alone translate a sentence as its ids and settings say: cached (a
        # glossary's terms, which its file may change, are not)
        kept_alone = caching and glossary is not None and not glossary.terms
        if kept_alone:
            found = [f or c for f, c in zip(found, self._cached(key, prepared.ids), strict=True)]
        held = [i for i, s in enumerate(s for d in prepared.docs for s in d.sentences)
                if glossary and found[i] is None and glossary.required(s)]
        read = await self.decode_held(prepared, held, glossary, cfg, nbest, found, waiting,
                                      queued)
        queued = (lambda: None) if held else queued  # (called: the held sentences' queue)
        if kept_alone:
            for i in held:
                self.storage.put(key, prepared.ids[i], found[i] or [])
        elif caching:  # (not where the glossary held it)
            found = [f or c for f, c in zip(found, self._cached(key, prepared.ids), strict=True)]
        missing = [i for i, f in enumerate(found) if f is None]
        if not missing:
            queued()
        else:
            work = self.worker().translate([prepared.ids[i] for i in missing], cfg, nbest,
                                           alone=sampling, queued=queued)
            decoded = await self.wait(work, waiting)
            for i, hyps in zip(missing, decoded, strict=True):
                found[i] = hyps
                if caching:
                    self.storage.put(key, prepared.ids[i], hyps)
        results, at = [], 0
        for doc in prepared.docs:
            n = len(doc.sentences)
            results.append(TextResult(doc, [h for h in found[at:at + n] if h is not None]))
            at += n
        await self.copy_unknown(results, cfg, waiting, read)
        await self.kept_apart(results, cfg, waiting, remember)
        await self.link(results, waiting)
        return results

    async def kept_apart(self, results: list[TextResult], cfg: DecodeConfig,
                         waiting: Callable[[], Any] | None, remember: bool) -> None:
        """Each sentence whose best translation lost the brackets or quotation marks the model
        read decoded again with them kept apart (``marks.lost_marks``), as ``mt translate``
        does (``long_sentences.translate_documents``), the model's alternatives after it; not
        one ``mt serve --memory`` holds (no ids)."""
        lost = lost_marks(self.translator)
        again = [(r, i) for r in results for i, h in enumerate(r.hyps)
                 if h and h[0].ids and lost(r.doc.sentences[i], h[0].text)]
        if not again:
            return
        sentences = [r.doc.sentences[i] for r, i in again]  # (split off the event loop)
        prepared = await self.off_loop(
            lambda: self.prepared(apart(self.translator, sentences), None, cfg))
        decoded = await self.decode(prepared, cfg, 1, waiting, remember=remember)
        for (r, i), d in zip(again, decoded, strict=True):
            r.hyps[i] = [Translation(d.text(), [], float("nan")), *r.hyps[i][1:]]

    def remembered(self, prepared: Prepared, remember: bool = True
                   ) -> list[list[Translation] | None]:
        """Each prepared sentence's translation as ``mt serve --memory`` holds it, or None
        (``remember``: none); counted (``/metrics``' ``mt_memory_hits_total``)."""
        memory = self.translator.memory if remember else None
        found: list[list[Translation] | None] = [
            None if memory is None or (t := memory.get(s)) is None else [
                Translation(t, [], float("nan"))] for d in prepared.docs for s in d.sentences]
        self.metrics.memory_hits.inc(sum(f is not None for f in found))
        return found

    def _cached(self, key: str, ids: list[list[int]]) -> list[list[Translation] | None]:
        """The translations the cache holds of ``ids`` with the settings ``key``, None where
        it holds none (counted)."""
        cached = self.storage.get(key, ids)
        self.metrics.cache_hits.inc(sum(c is not None for c in cached))
        return cached

    async def decode_held(self, prepared: Prepared, held: list[int], glossary: Glossary | None,
                          cfg: DecodeConfig, nbest: int, found: list[list[Translation] | None],
                          waiting: Callable[[], Any] | None = None,
                          queued: Callable[[], None] = lambda: None) -> list[str] | None:
        """The sentences at ``held`` decoded with the server's glossary (as it was when they
        were found to hold its terms) into ``found``, on the worker; each sentence as the model
        read it (``glossary.steered``), or None if none."""
        if not held or glossary is None:
            return None
        translator = self.translator
        sentences = translator.as_read([s for d in prepared.docs for s in d.sentences])

        def run() -> tuple[list[str], list[list[Translation]]]:  # on the worker
            marked, ids, required = steered(translator, [sentences[i] for i in held], glossary,
                                            [prepared.ids[i] for i in held], cfg)
            return marked, translator.translate_ids(ids, cfg, nbest, required=required,
                                                    widest=self.limits.max_beam)

        queued()
        marked, decoded = await self.wait(self.worker().call(run), waiting)
        for i, m, hyps in zip(held, marked, decoded, strict=True):
            found[i], sentences[i] = hyps, m
        return sentences

    async def copy_unknown(self, results: list[TextResult], cfg: DecodeConfig,
                           waiting: Callable[[], Any] | None = None,
                           read: list[str] | None = None) -> None:
        """Each ``<unk>`` written as the word it attends to most of the source as the model read
        it (``read``, else the texts'; ``translate/unknown.py``), after the cache (by ids)."""
        if not cfg.replace_unk or not any(UNK_ID in h.ids for r in results for hyps in r.hyps
                                          for h in hyps):
            return
        sentences = read or self.translator.as_read([s for r in results
                                                     for s in r.doc.sentences])
        found, translator = [hyps for r in results for hyps in r.hyps], self.translator
        copied = await self.wait(self.worker().call(
            lambda: copy_unknown(translator, sentences, found, bool(read))), waiting)
        for r in results:
            r.hyps, copied = copied[:len(r.hyps)], copied[len(r.hyps):]

    async def link(self, results: list[TextResult],
                    waiting: Callable[[], Any] | None = None) -> None:
        """Where each translation (each hypothesis) of each sentence that inline markup cuts
        reads in it (``inline.attention_links``, on the worker, which owns the model), for
        rebuilding; by relative position where the engine gives no attention weights."""
        cut = [(r, i, j) for r in results for i, c in enumerate(r.doc.cuts) if c
               for j in range(len(r.hyps[i]))]
        if not cut:
            return
        sources = [r.doc.sentences[i] for r, i, _ in cut]
        outputs = [r.hyps[i][j].text for r, i, j in cut]
        translator = self.translator
        found = await self.wait(self.worker().call(
            lambda: attention_links(translator, sources, outputs)), waiting)
        for (result, i, j), links in zip(cut, found or [None] * len(cut), strict=True):
            result.links[i, j] = links

    async def wait(self, work: Any, waiting: Callable[[], Any] | None = None) -> Any:
        """Await the worker's answer within the time limit; a 504 past it, and the work is
        cancelled there, as it is when the client leaves."""
        task = asyncio.ensure_future(work)
        watch = asyncio.ensure_future(waiting()) if waiting else None
        timeout = self.limits.timeout_s
        try:
            done, _ = await asyncio.wait({task} | ({watch} if watch else set()),
                                         timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if watch is not None:
                watch.cancel()
        if task in done:
            try:
                return task.result()
            except QueueFullError:
                raise RequestError(429, "Slowdown: the server is busy (its queue is full); "
                                   "try again shortly", {"Retry-After": "1"}) from None
            except StoppingError:
                raise RequestError(503, "the server is stopping; try again on another",
                                   {"Connection": "close"}) from None
            except MTError as exc:  # what the engine refuses (CTranslate2: no n-best, ...)
                raise RequestError(422, str(exc).strip().splitlines()[0]) from None
        task.cancel()
        # its cancelling done before the answer goes: a queued job has left the queue (else
        # the worker could pick it up in the meantime and decode what nobody waits for)
        await asyncio.wait({task})
        if watch is not None and watch in done:
            raise RequestError(499, "the client closed the connection")
        raise RequestError(504, f"not translated within {timeout:g} s; send fewer or shorter "
                           "sentences")
