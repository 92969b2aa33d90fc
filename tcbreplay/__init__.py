"""tcbreplay: record tool-calling agent traces once, score them offline as often as you like."""

__version__ = "0.1.0"
