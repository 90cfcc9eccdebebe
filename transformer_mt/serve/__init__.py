"""``mt serve``: a translation server (``app.py``), its request handling (``api.py``), the
decoding worker that batches requests (``batcher.py``) and the web page (``page.html``)."""
