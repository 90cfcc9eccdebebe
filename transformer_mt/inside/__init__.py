"""Looking inside a model: one translation stage by stage (``trace.py``, ``mt trace``), the
logit lens, parts switched off, a run's checkpoints and two models side by side (``lens.py``),
and the pictures of a run and of attention (``plots.py``)."""
