"""transformer_mt: a from-scratch Transformer that translates German into English."""

__version__ = "0.1.0"
