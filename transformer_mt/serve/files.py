"""LibreTranslate's file translation: ``POST /translate_file`` (a multipart upload: ``file``,
``source``, ``target``, ``api_key``) answers ``{"translatedFileUrl": ...}``, and
``GET /download_file/NAME`` gives the file back. The formats are ``translate/files.py``'s
(text, HTML, subtitles); the file is decoded with the server's worker, batched and cached
like any request.

Translated files wait in ``file_store.py``'s directory (one for all the server's workers: any
of them answers a download).
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import Response
from pydantic import BaseModel

from transformer_mt.errors import MTError
from transformer_mt.serve.api import LIBRE_ERRORS, ErrorBody
from transformer_mt.serve.deps import CallerDep, ServiceDep, libre_key
from transformer_mt.serve.errors import RequestError
from transformer_mt.serve.file_store import KEEP_S
from transformer_mt.translate.files import FileText, read_file


class TranslatedFile(BaseModel):
    translatedFileUrl: str  # noqa: N815 (LibreTranslate's field name)


router = APIRouter(tags=["LibreTranslate"], responses=LIBRE_ERRORS)


@router.post("/translate_file", response_model=TranslatedFile,
             dependencies=[Depends(libre_key)],
             summary="LibreTranslate: translate a file (.txt, .html, .md, .srt, .vtt, .ass, "
             ".ssa, .xlf, .po, .docx, .pptx, .xlsx, .odt, .odp, .ods, .epub, .pdf), its format "
             "kept; download it from translatedFileUrl")
async def translate_file(request: Request, svc: ServiceDep, who: CallerDep,
                         file: Annotated[UploadFile | None, File()] = None,
                         source: Annotated[str, Form()] = "auto",
                         target: Annotated[str, Form()] = "") -> TranslatedFile:
    if file is None or not file.filename:
        raise RequestError(400, "Invalid request: missing file parameter")
    key = await translated(svc, who, file.filename, await file.read(), source, target)
    return TranslatedFile(translatedFileUrl=str(request.url_for("download_file", key=key)))


async def translated(svc: ServiceDep, who: CallerDep, name: str, data: bytes, source: str,
                     target: str) -> str:
    """The file translated and kept; its download name."""
    svc.check_pair(source, target)
    doc = await svc.off_loop(_read, svc, name, data)
    svc.charge(who.client, doc.chars)
    prepared = await svc.off_loop(svc.prepared, doc.documents, doc.chars)
    results = await svc.decode(prepared, svc.translator.settings(), 1, waiting=who.left,
                               queued=who.queued)
    try:  # (a PDF's drawing: seconds for a long one, off the event loop)
        out = await svc.off_loop(doc.rebuild, [r.text() for r in results])
    except MTError as exc:  # a translation the format cannot hold (a PDF's fonts)
        raise RequestError(400, f"Invalid request: {exc}") from None
    return await asyncio.get_running_loop().run_in_executor(None, svc.files.put, name, out)


def _read(svc: ServiceDep, name: str, data: bytes) -> FileText:
    """The file's texts, split into sentences (seconds for a large one: off the event loop);
    a 400 for a file not read here, or one larger than a file may be."""
    try:
        memory = svc.translator.memory
        doc = read_file(name, data, svc.src_lang, svc.tgt_lang,
                        held=memory.holds if memory else None)
    except MTError as exc:
        raise RequestError(400, f"Invalid request: {exc}") from None
    if doc.chars > svc.limits.max_file_chars:
        raise RequestError(400, f"'{name}' holds {doc.chars:,} characters; at most "
                           f"{svc.limits.max_file_chars:,} a file here: split it")
    return doc


@router.get("/download_file/{key}", summary="LibreTranslate: a translated file",
            response_class=Response, responses={
                200: {"content": {"application/octet-stream": {}},
                      "description": "the translated file, as an attachment"},
                404: {"model": ErrorBody, "description": "no such file here (any more)"}})
async def download_file(key: str, svc: ServiceDep) -> Response:
    data = await asyncio.get_running_loop().run_in_executor(None, svc.files.get, key)
    if data is None:
        raise RequestError(404, "no such file here: it was never translated, or was removed "
                           f"{KEEP_S / 60:g} minutes after; translate it again")
    name = key.split(".", 1)[1]
    return Response(data, media_type="application/octet-stream",
                    headers={"Content-Disposition": f'attachment; filename="{name}"'})

