"""The SQL the stages run: the package ``tcbreplay.queries`` (see setup.py), in a wheel and in
an editable install alike; :func:`tcbreplay._store.views.queries_dir` finds it."""
