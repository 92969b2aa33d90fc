"""Small helpers shared by the CLI and store tests."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import pickle
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

from click.testing import CliRunner, Result

from tcbreplay._cli import main


def load_script(name: str, path: Path) -> ModuleType:
    """The Python file ``path`` as a module named ``name`` (the fixtures' generators, which
    share a file name)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cli(*args: object, crash_ok: bool = False) -> Result:
    """Run ``tcbreplay`` with click's test runner (arguments may be paths).

    An exception the command does not turn into an exit code (a crash in tcbreplay) fails
    the test with its traceback, unless ``crash_ok``: a crash must never pass for an
    expected ``exit 1``."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=crash_ok)


#: the tests' folder, their data files and the repository's root, for tests in any subfolder
TESTS = Path(__file__).parent
TEST_DATA = TESTS / "data"
ROOT = TESTS.parent
TAU_BENCH = TEST_DATA / "tau-bench"
# τ-bench's six airline tools that change the database, as a score --role option
TAU_WRITE = (
    "write=book_reservation,cancel_reservation,update_reservation_flights,"
    "update_reservation_passengers,update_reservation_baggages,send_certificate"
)


def import_tau_bench(root: Path, *, roles: bool = False) -> Path:
    """The vendored τ-bench sample imported as run ``tau`` into the store ``root`` (with
    ``roles``: scored with its write tools too); the store's path."""
    traces, tools = TAU_BENCH / "gpt-4o-airline-sample.json", TAU_BENCH / "airline-tools.json"
    result = cli("import", "--format", "tau-bench", "--traces", traces, "--tools", tools,
                 "--run-id", "tau", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    if roles:
        scored = cli("score", "tau", "--role", TAU_WRITE, "--store", root)
        assert scored.exit_code == 0, scored.output
    return root


def snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` by relative path (directories as '<dir>'), to show
    that a command left the store as it was."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): "<dir>"
        if p.is_dir()
        else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
    }


def cli_process(*args: str, **kwargs) -> subprocess.Popen:
    """``python -m tcbreplay ARGS`` in a subprocess (unbuffered, without an API key), for
    tests that kill it or interrupt it."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("GOOGLE_API_KEY", None)
    return subprocess.Popen(
        [sys.executable, "-m", "tcbreplay", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def journal_lines(run_dir: Path) -> int:
    """Samples a recording has finished so far (lines of its journal)."""
    path = run_dir / "journal.jsonl"
    return path.read_text().count("\n") if path.exists() else 0


def wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def unscored_copy(store, run_id: str, root: Path) -> tuple[Path, str]:
    """Copy run ``run_id`` of ``store`` into the store at ``root``, without its scores and
    dashboard file: (root, run_id)."""
    shutil.copytree(store.run_dir(run_id), root / run_id)
    for name in ("scores", "evaluations"):
        shutil.rmtree(root / run_id / name, ignore_errors=True)
    return root, run_id


@contextmanager
def fifo_read(path: Path) -> Iterator[list[bytes]]:
    """Make a FIFO at ``path`` and read it in a thread while the block runs; the list yielded
    holds every byte written into it once the block is left. A write end held open until then
    keeps the reader from stopping before the writer under test opens the FIFO, and lets it
    stop when that writer never does."""
    os.mkfifo(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # needs no writer yet
    hold = os.open(path, os.O_WRONLY)
    os.set_blocking(fd, True)
    chunks: list[bytes] = []

    def read() -> None:
        with os.fdopen(fd, "rb") as src:
            while chunk := src.read(1 << 16):
                chunks.append(chunk)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    try:
        yield chunks
    finally:
        os.close(hold)
        thread.join(timeout=60)
    assert not thread.is_alive(), f"{path}: still being read after 60 s"


def with_messages(table, texts: list) -> object:
    """A ``messages.parquet`` table with its message texts replaced, written as another tool
    (or a tcbreplay before schema 5) writes the file: without the ``calls`` column, so that
    each message's calls are read from its text, as edited."""
    import pyarrow as pa

    at = table.schema.get_field_index("message")
    table = table.set_column(at, "message", pa.array(texts, pa.string()))
    return table.drop_columns([n for n in ("calls",) if n in table.column_names])


class ScorersHere:
    """Ray's API as ray_parts uses it, each scorer's call run in this process on arguments
    that have crossed a pickle, as they cross to a Ray actor: what a scorer is given must
    name the run wherever it runs. (A real Ray's actors would not see what a test sets in
    this process's environment after the tests' Ray started, such as the moto server's
    address.)"""

    class exceptions:  # (as ray.exceptions)
        class RayError(Exception):
            pass

        class RayTaskError(RayError):
            cause: BaseException

        class RayActorError(RayError):
            pass

    def remote(self, actor: type) -> Any:
        """An actor class whose actors are objects of this process, each call of a method
        given its arguments pickled and unpickled."""

        def started(*args: Any) -> Any:
            here = actor(*args)

            def method(name: str) -> Any:
                def run(*args: Any) -> Any:
                    return getattr(here, name)(*pickle.loads(pickle.dumps(args)))

                return SimpleNamespace(remote=run)

            return SimpleNamespace(score=method("score"), pid=method("pid"), keep=method("keep"))

        return SimpleNamespace(options=lambda **_: SimpleNamespace(remote=started))

    def cancel(self, ref: Any) -> None:
        pass

    def get_actor(self, name: str, namespace: str) -> Any:
        """(Every scorer is there already: no warning of scorers started.)"""
        return SimpleNamespace(name=name)

    def get(self, result: Any) -> Any:
        return result

    def put(self, value: Any) -> Any:
        return value

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": 2.0}


def as_the_run_wrote(*paths: Path) -> None:
    """Record rewritten data files of a run in its manifest as a writer of the run records
    them (an older version, another tool, an edit a test makes on purpose): a file the run
    did not write is refused by ``score`` and ``record --resume``."""
    import json

    from tcbreplay._store.files import file_record

    for path in paths:
        manifest_path = path.parent / "manifest.json"
        manifest = json.loads(manifest_path.read_text())
        manifest.setdefault("files", {})[path.name] = file_record(path)
        manifest_path.write_text(json.dumps(manifest))


def record_greeting(
    folder: Path, question: str, model: str, url: str, run_id: str, *,
    agent: str | None = None, **settings: Any,
) -> Path:  # fmt: skip
    """Record one sample, ``greet`` asking ``question`` (the tool-call benchmark's tools and
    prompt), with ``model`` (a ``--model`` spec, with ``settings``) at ``url``, a loopback
    server of its provider's wire, by ``agent`` when given (``module:factory``), into the
    store ``folder/traces``: that store. The caller sets the provider's key."""
    import json

    from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs
    from tcbreplay._record.models import parse_model
    from tcbreplay._record.options import RecordOptions
    from tcbreplay._record.runner import record_run
    from tcbreplay._store.runs import Store

    dataset = folder / "dataset.json"
    dataset.write_text(json.dumps([{"id": "greet", "input": question, "target": []}]))
    tools = "tcbreplay._inputs.benchmarks.tool_call.tools:TOOLS"
    inputs = load_inputs(None, dataset, tools, BENCHMARKS["tool-call"].system_prompt)
    summary = record_run(
        inputs, parse_model(model, {"base_url": url, **settings}), Store(folder / "traces"),
        run_id=run_id, options=RecordOptions(workers=1), agent=agent,
    )  # fmt: skip
    assert summary.ok == 1
    return folder / "traces"


def chat_answer(url: str, body: dict) -> str | tuple[int, str]:
    """The text the openai SDK is answered for the Chat Completions request ``body`` by the
    server at ``url``, or the status and message of its error."""
    import openai

    client = openai.OpenAI(base_url=url + "/v1", api_key="sk-serve-test")
    try:
        return client.chat.completions.create(**body).choices[0].message.content or ""
    except openai.APIStatusError as exc:
        return exc.status_code, str(exc.body.get("message") if isinstance(exc.body, dict)
                                    else exc.body)  # fmt: skip


# two samples the loopback servers of the record tests script: an addition the add_numbers
# tool answers, and a greeting no tool does
ADD, GREET = "What is 25 plus 4.5?", "Hi there!"


def add_and_greet(folder: Path) -> Path:
    """A dataset file in ``folder`` of the two samples :data:`ADD` and :data:`GREET`."""
    import json

    path = folder / "dataset.json"
    entries = [
        {"id": "add", "input": ADD,
         "target": [{"name": "add_numbers", "args": {"a": 25, "b": 4.5}}]},
        {"id": "greet", "input": GREET, "target": []},
    ]  # fmt: skip
    path.write_text(json.dumps(entries))
    return path


def ask_gemini(url: str, key: str, model: str, question: str, **config: object) -> str:
    """The text google-genai is answered at ``url`` for ``question``, sent with the tool-call
    benchmark's prompt and tools and these settings (``response_mime_type``,
    ``response_json_schema``, ...) as a GenerateContentConfig's."""
    from google import genai
    from google.genai import types
    from langchain_core.utils.function_calling import convert_to_openai_function

    from tcbreplay._inputs.benchmarks import BENCHMARKS, load_inputs

    client = genai.Client(api_key=key, http_options={"base_url": url})
    prompt = BENCHMARKS["tool-call"].system_prompt.read_text()
    declared = [
        types.FunctionDeclaration(
            name=f["name"], description=f["description"], parameters_json_schema=f["parameters"]
        )
        for f in map(convert_to_openai_function, load_inputs("tool-call").toolset.tools)
    ]
    settings = types.GenerateContentConfig(
        system_instruction=prompt, tools=[types.Tool(function_declarations=declared)],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        temperature=0.7, **config,
    )  # fmt: skip
    return client.models.generate_content(model=model, contents=question, config=settings).text
