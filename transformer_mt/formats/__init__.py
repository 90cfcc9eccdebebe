"""Models in other tools' formats: CTranslate2 (``ctranslate2.py``, and its engine's files),
Hugging Face transformers (``huggingface.py``; the way back, ``mt import``:
``huggingface_import.py``) and Argos Translate packages (``argos.py``). ``mt export`` and
``mt import`` (``cli/export.py``) call them."""
