"""``python -m tcbreplay`` runs the command line."""

from tcbreplay.cli import run

run()
