"""The face every trace dialect shows: a module with a ``sniff`` and a ``read``.

``sniff(file: TraceFile) -> Sniff`` says how sure the dialect is that the file is written in
it, and why (or why not). It looks only at what :class:`TraceFile` offers cheaply: the
file's first bytes (``head``), its first line (``first_line``) or its parsed top level
(``top``); each is worked out once and shared by every dialect's sniff.

``read(file: TraceFile, inputs: BenchmarkInputs | None) -> SourceTraces`` reads the whole file
(``data``, or ``path`` for a reader that opens it itself) into
:class:`SourceTraces` (the samples' trials as :class:`TraceLine`), raising a
:class:`~tcbreplay.errors.TraceError` that names the place for anything it cannot read.
``inputs`` are the dataset and tools given with ``--dataset`` and ``--tools`` (None without).
A dialect may take options of its own (``import --gold-from`` of ``tau2``): its row names
them, and ``read`` takes them as keyword arguments.

Each dialect has its row in :mod:`tcbreplay._importers.registry`, which names its module;
the module is imported only when a file is sniffed or read, so the command line starts
without any of them.
"""

from __future__ import annotations

import importlib
import io
import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, BinaryIO

from tcbreplay import _json
from tcbreplay.errors import TraceError

if TYPE_CHECKING:
    from tcbreplay._inputs.benchmarks import BenchmarkInputs
    from tcbreplay._inputs.dataset import Dataset

# how much of a file a sniff sees as its head
HEAD_BYTES = 64 * 1024
# a pick less sure than this is a fallback: sniffing says which dialects it tried and why
# each did not fit
GUESS = 0.25


@dataclass
class TraceLine:
    """One sample's trial as an importer read it: its messages serialized as the store keeps
    them (:func:`tcbreplay._record.messages.serialize_messages`)."""

    sample_id: str
    messages: list[dict[str, Any]]
    trial: int = 0
    status: str = "ok"
    error: str | None = None
    error_type: str | None = None
    metadata: dict[str, Any] | None = None
    place: str = field(default="", compare=False)
    # what an export of a run in LangChain's or OpenAI's form says (see _importers.timings)
    attempts: int | None = None
    duration_s: float | None = None


@dataclass
class SourceTraces:
    """What a traces file holds: its lines, and where the format keeps them, the samples'
    inputs and gold calls (``dataset``), the tools, the model and the benchmark."""

    lines: list[TraceLine]
    dataset: Dataset | None = None
    tools: list[dict[str, Any]] | None = None
    model: str | None = None
    benchmark: tuple[str, str] | None = None  # (name, title), where the format names one
    # why the format gives no tools where it may (τ²: a domain whose tools do not ship), for
    # the error that asks for --tools
    no_tools: str | None = None


@dataclass(frozen=True)
class Sniff:
    """A dialect's verdict on a file: how sure it is that the file is written in it, and why.

    ``confidence`` runs from 0 (not this dialect's) to 1 (a mark only this dialect's files
    have); about 0.9 for its own keys or message shapes; 0.5 or less where another dialect
    reads the file as well; below :data:`GUESS` a fallback. Sniffing picks the surest
    dialect, the first registered on a tie. ``reason`` is said to the user after the
    dialect's name: ``format: openai (<reason>)``, or ``openai: <reason>`` in the list of
    dialects a file did not fit. A rejection is ``close`` when the file has the dialect's
    shape but not its content (a JSON list, but not of τ-bench results): when no dialect
    fits, a single close one's reason is the whole error.
    """

    confidence: float
    reason: str
    close: bool = False

    @classmethod
    def no(cls, reason: str, *, close: bool = False) -> Sniff:
        """Not this dialect's file, and why."""
        return cls(0.0, reason, close)

    @property
    def fits(self) -> bool:
        return self.confidence > 0


@dataclass(frozen=True)
class Peeked:
    """A JSON value a sniff looked at, or why there is none (``problem``)."""

    value: Any = None
    problem: str | None = None


class TraceFile:
    """A traces file as the dialects see it: its ``name`` (for messages), and its ``path``,
    its bytes (``data``) or both. Given only a path, the file is read as far as asked: a
    sniff of its head or first line reads that much of it."""

    def __init__(self, name: str, *, path: Path | None = None, data: bytes | None = None):
        if path is None and data is None:
            raise ValueError("a TraceFile needs a path or its bytes")
        self.name = name
        self.path = path
        self._data = data

    @classmethod
    def at(cls, path: str | Path) -> TraceFile:
        """The file at ``path``, read when asked for."""
        return cls(Path(path).name, path=Path(path))

    @property
    def suffix(self) -> str:
        return PurePath(self.name).suffix

    @property
    def data(self) -> bytes:
        """The whole file."""
        if self._data is None:
            assert self.path is not None
            try:
                self._data = self.path.read_bytes()
            except OSError as exc:
                raise TraceError(f"{self.path}: cannot read traces: {exc.strerror or exc}") from exc
        return self._data

    @cached_property
    def head(self) -> bytes:
        """The first :data:`HEAD_BYTES` of the file."""
        with self._opened() as f:
            return f.read(HEAD_BYTES)

    @cached_property
    def first_line(self) -> Peeked:
        """The JSON value of the file's first line that is not blank (a JSON Lines file's
        first record), or why it has none."""
        raw, _ = self._first_line
        if raw is None:
            return Peeked(problem="it is empty")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return Peeked(problem="its first line is not UTF-8 text")
        try:
            return Peeked(_json.loads(text))
        except json.JSONDecodeError as exc:
            return Peeked(problem=f"its first line is not JSON ({exc.msg})")
        except _json.LimitError as exc:
            return Peeked(problem=f"its first line holds {exc.problem}")

    @cached_property
    def top(self) -> Any:
        """The JSON value the whole file is, when it is one JSON document (None when it is not:
        JSON Lines, text, a zip file); for an object beyond the JSON limits, its top-level
        keys (as a dict of None), so that a sniff can still tell it and reading it says
        what is beyond them."""
        if self.head.removeprefix(_BOM).lstrip(_BLANK)[:1] not in (b"[", b"{"):
            return None
        _, more = self._first_line
        if self.first_line.problem is None:
            # a first line that is JSON, and more: JSON Lines; else the document is that line
            return None if more else self.first_line.value
        try:
            text = self.data.decode("utf-8-sig").lstrip()
        except UnicodeDecodeError:
            return None
        try:
            return _json.loads(text)
        except json.JSONDecodeError:
            return None
        except _json.LimitError:
            return _top_keys(text) if text[:1] == "{" else None

    @cached_property
    def _first_line(self) -> tuple[bytes | None, bool]:
        """The first line that is not blank (without a BOM and the blanks around it), and
        whether another such line follows it. Lines end at ``"\\n"`` only, as the readers
        split them."""
        with self._opened() as f:
            if f.read(len(_BOM)) != _BOM:
                f.seek(0)
            lines = (stripped for line in f if (stripped := line.strip(_BLANK)))
            first = next(lines, None)
            return first, next(lines, None) is not None

    def _opened(self) -> BinaryIO:
        if self._data is not None or self.path is None:
            return io.BytesIO(self.data)
        try:
            return self.path.open("rb")
        except OSError as exc:
            raise TraceError(f"{self.path}: cannot read traces: {exc.strerror or exc}") from exc


@dataclass(frozen=True)
class Dialect:
    """A row of the registry: the dialect's name (``--format``) and its earlier names, what
    ``import --help`` says of it, the module holding its ``sniff`` and ``read``, and what
    its files hold.

    ``holds_samples``: its files can hold the samples' inputs and gold calls, so
    ``--dataset`` may be left out. ``given_only``: reading its files takes more than the
    file (BFCL's answers), so sniffing recognises them but never picks the dialect; the text
    says how to name it. ``options``: the keyword arguments its ``read`` takes beside the
    file and the inputs (``import`` options of this dialect only).
    """

    name: str
    module: str
    summary: str
    aliases: tuple[str, ...] = ()
    holds_samples: bool = False
    given_only: str | None = field(default=None, compare=False)
    options: tuple[str, ...] = ()

    def sniff(self, file: TraceFile) -> Sniff:
        """How sure the dialect is that ``file`` is written in it, and why."""
        verdict: Sniff = self._module().sniff(file)
        return verdict

    def read(self, file: TraceFile, inputs: BenchmarkInputs | None, **options: Any) -> SourceTraces:
        """The traces of ``file``, read in this dialect (with ``options`` of its own, which
        its row names)."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise TraceError(f"--format {self.name} takes no {unknown[0]} option")
        source: SourceTraces = self._module().read(file, inputs, **options)
        return source

    def _module(self) -> Any:
        return importlib.import_module(self.module)


_BOM = b"\xef\xbb\xbf"
_BLANK = b" \t\r\n"

# a JSON string (a key when a colon follows) or a bracket; brackets inside strings are skipped
_TOKENS = re.compile(
    r'(?P<string>"[^"\\]*(?:\\.[^"\\]*)*")(?P<colon>\s*:)?|(?P<open>[\[{])|(?P<close>[\]}])'
)


def _top_keys(text: str) -> dict[str, None] | None:
    """The keys of the JSON object ``text``, found without reading its values (they may be
    too deep or too long for Python's reader)."""
    keys: dict[str, None] = {}
    depth = 0
    for match in _TOKENS.finditer(text):
        if match.group("open"):
            depth += 1
        elif match.group("close"):
            depth -= 1
            if depth == 0:
                return keys
        elif match.group("colon") and depth == 1:
            try:
                keys[json.loads(match.group("string"))] = None
            except json.JSONDecodeError:
                return None
    return None
