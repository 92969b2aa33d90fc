"""tcbreplay's version: the package exports it, the build reads it (pyproject.toml), and the
files tcbreplay writes name it."""

__version__ = "0.1.0"
