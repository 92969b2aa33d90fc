"""``python -m tcbreplay`` runs the command line."""

from tcbreplay._cli import run

run()
