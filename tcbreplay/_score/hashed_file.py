"""A file being written, and the sha256 of what was written to it.

A scoring's files (``scores.parquet``, ``pairs.parquet``, the dashboard file) are hashed as
they are written rather than read back: a run of a million samples' dashboard file is
hundreds of megabytes. Their sha256 go into the audit record
(:mod:`tcbreplay._score.result_hashes`, :func:`tcbreplay._score.dashboard.dashboard_record`).
"""

from __future__ import annotations

import hashlib
import io
from typing import Any, BinaryIO

# what a copy into a hashed file reads at a time
COPY_CHUNK = 1 << 24


class HashedFile(io.RawIOBase):
    """A binary file being written, as our own code or a writer that takes a file object
    (Arrow's Parquet writer, Polars') writes it, and the sha256 of what was written. An
    operating-system failure of a write is kept (``failure``): Polars hands it on as text
    without its error number."""

    def __init__(self, out: BinaryIO) -> None:
        super().__init__()
        self._out = out
        self._digest = hashlib.sha256()
        self._size = 0
        self.failure: OSError | None = None

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        try:
            self._out.write(data)
        except OSError as exc:
            self.failure = exc
            raise
        self._digest.update(data)
        size = memoryview(data).nbytes
        self._size += size
        return size

    def copy_from(self, source: BinaryIO) -> None:
        """Write what ``source`` holds from where it stands."""
        while chunk := source.read(COPY_CHUNK):
            self.write(chunk)

    def tell(self) -> int:
        return self._size

    @property
    def name(self) -> Any:
        """The name of the file written (as a file object's)."""
        return getattr(self._out, "name", None)

    def hexdigest(self) -> str:
        return self._digest.hexdigest()
