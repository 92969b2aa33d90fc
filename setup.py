"""What pyproject.toml cannot say: the scoring kernels' C extension
(tcbreplay/_score/kernels/_compiled.pyx, with the .pxi files it includes and words.h), and the SQL
of queries/ shipped inside the package as tcbreplay/queries."""

import sys

from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

KERNELS = Extension(
    "tcbreplay._score.kernels._compiled",
    ["tcbreplay/_score/kernels/_compiled.pyx"],
    include_dirs=["tcbreplay/_score/kernels"],
    depends=["tcbreplay/_score/kernels/words.h"],
    # Python's own flags ask for debug information (-g), which a quarter of the build's time
    # went to and no user reads: the same code, without it
    extra_compile_args=[] if sys.platform == "win32" else ["-g0"],
)

# (queries/__init__.py makes it a regular package, which an editable install can import too)
QUERIES = ["tcbreplay.queries", "tcbreplay.queries.named"]

setup(
    packages=[*find_packages(include=["tcbreplay", "tcbreplay.*"]), *QUERIES],
    package_dir={"tcbreplay.queries": "queries"},
    # the generated C goes under build/, not beside the sources
    ext_modules=cythonize([KERNELS], build_dir="build/cython", quiet=True),
)
