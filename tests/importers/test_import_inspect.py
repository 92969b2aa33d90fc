"""inspect_ai logs written by inspect_ai itself (its mockllm model returning scripted tool
calls), imported with one command (#20): epochs become trials, gold calls from the samples'
metadata or a dataset, tools from the log. Skipped without inspect_ai (``tcbreplay[inspect]``)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import polars as pl
import pytest
from helpers import TEST_DATA, cli, snapshot
from inspect_logs import GOLD, QUESTIONS, write_log

from tcbreplay._importers import inspect as inspect_dialect
from tcbreplay._importers.dialect import TraceFile

# found, not imported: inspect_ai takes seconds to import, paid by the tests that run, not by
# every collection of the suite; and they run in make test-slow (writing the module's log with
# inspect_ai's own code took 10-20 s of make test's 4 minutes)
pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("inspect_ai") is None,
        reason="needs inspect_ai (tcbreplay[inspect])",
    ),
    pytest.mark.slow,
]

DATA = TEST_DATA


@pytest.fixture(scope="module")
def eval_log(tmp_path_factory) -> Path:
    return write_log(tmp_path_factory.mktemp("inspect"))


def scores(root: Path, run_id: str) -> list[tuple]:
    result = cli("score", run_id, "--store", root, "--format", "json")
    assert result.exit_code == 0, result.output
    frame = pl.read_parquet(root / run_id / "scores" / "spec" / "scores.parquet")
    return (
        frame.sort("sample_id", "trial")
        .select("sample_id", "trial", "tsa", "tp", "args_invalid", "args_total")
        .rows()
    )


def test_a_log_written_by_inspect_ai_imports_with_one_command_and_scores(eval_log, tmp_path):
    from inspect_ai.log import read_eval_log

    assert eval_log.suffix == ".eval"
    assert len(read_eval_log(str(eval_log)).samples) == 4  # the log, read by inspect_ai
    root = tmp_path / "traces"
    result = cli("import", "--traces", eval_log, "--run-id", "ins", "--store", root)
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("format: inspect (an inspect_ai .eval log")
    assert "run ins: 2 samples, 2 trials each: 4/4 trials imported" in result.stdout
    assert scores(root, "ins") == [
        ("add", 0, 1.0, 1.0, 0, 2),
        ("add", 1, 1.0, 1.0, 0, 2),
        ("mul", 0, 1.0, 1.0, 0, 2),
        ("mul", 1, 1.0, 1.0, 1, 2),  # the second epoch's wrong value
    ]
    rows = json.loads(cli("sql", "select sample_id, trial, metadata->>'difficulty' as d, "
                          "metadata->'scores' as s from samples order by 1, 2", "--format",
                          "json", "--store", root).stdout)  # fmt: skip
    assert [(r["sample_id"], r["trial"], r["d"]) for r in rows] == [
        ("add", 0, "0"),
        ("add", 1, "0"),
        ("mul", 0, "1"),
        ("mul", 1, "1"),
    ]
    manifest = json.loads((root / "ins" / "manifest.json").read_text())
    assert [t["name"] for t in manifest["tools"]["specs"]] == ["add_numbers", "multiply_numbers"]
    assert manifest["model"]["id"] == "mockllm/model"


@pytest.mark.parametrize(
    ("task", "title"),
    [("inspect_evals/arith", "arith"), ("arith", "arith"), (".hidden", "inspect")],
)
def test_an_imported_log_is_named_by_its_task(tmp_path, task, title):
    """Its report was titled "Tool Call Benchmark"; the title also names the dashboard file, so
    one that cannot is the format's name."""
    log = write_log(tmp_path / "logs", epochs=1, name=task)
    root = tmp_path / "traces"
    result = cli("import", "--traces", log, "--run-id", "ins", "--store", root)
    assert result.exit_code == 0, result.output
    manifest = json.loads((root / "ins" / "manifest.json").read_text())
    assert manifest["benchmark"] == {"name": task, "title": title}
    page = tmp_path / "r.html"
    assert cli("report", "ins", "-o", page, "--store", root).exit_code == 0
    assert f"<title>tcbreplay report: {title}</title>" in page.read_text()
    assert cli("score", "ins", "--store", root).exit_code == 0
    assert [p.name for p in (root / "ins" / "evaluations").iterdir()] == [f"{title}_ins.json"]


def test_a_json_log_with_a_dataset_and_tools(tmp_path):
    log = write_log(tmp_path / "logs", epochs=1, fmt="json")
    dataset = tmp_path / "ds.json"
    dataset.write_text(json.dumps([{"id": k, "input": q, "target": GOLD[k]}
                                   for k, q in QUESTIONS.items()]))  # fmt: skip
    root = tmp_path / "traces"
    result = cli("import", "--traces", log, "--dataset", dataset, "--tools",
                 DATA / "tools_shop.json", "--run-id", "ins", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("format: inspect (an inspect_ai .json log")
    assert scores(root, "ins") == [("add", 0, 1.0, 1.0, 0, 2), ("mul", 0, 1.0, 1.0, 0, 2)]


def test_a_log_is_paired_with_the_dataset_by_input_where_ids_disagree(tmp_path):
    """A log of a dataset without ids numbers its samples from 1, a dataset file from 0: each
    trace was paired with the next question's gold, in silence. Here the ids are swapped."""
    log = write_log(tmp_path / "logs", epochs=1, fmt="json")
    swapped = tmp_path / "swapped.json"
    entries = [{"id": "mul", "input": QUESTIONS["add"], "target": GOLD["add"]},
               {"id": "add", "input": QUESTIONS["mul"], "target": GOLD["mul"]}]  # fmt: skip
    swapped.write_text(json.dumps(entries))
    root = tmp_path / "traces"
    result = cli("import", "--traces", log, "--dataset", swapped, "--tools",
                 DATA / "tools_shop.json", "--run-id", "ins", "--store", root)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert scores(root, "ins") == [("add", 0, 1.0, 1.0, 0, 2), ("mul", 0, 1.0, 1.0, 0, 2)]
    other = tmp_path / "other.json"
    entries = [{"id": "add", "input": "What is 1 plus 1?", "target": []},
               {"id": "mul", "input": QUESTIONS["mul"], "target": []}]  # fmt: skip
    other.write_text(json.dumps(entries))
    refused = cli("import", "--traces", log, "--dataset", other, "--tools",
                  DATA / "tools_shop.json", "--run-id", "other", "--store", root)  # fmt: skip
    assert refused.exit_code == 2
    assert "sample 'add', epoch 1: its input 'What is 2 plus 3?' is not the input of " in (
        refused.stderr
    )
    assert not (root / "other").exists()


def test_a_log_without_gold_calls_asks_for_a_dataset(tmp_path):
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(write_log(tmp_path / "logs", epochs=1)))
    for sample in log.samples:
        sample.metadata = {}
    path = tmp_path / "plain.eval"
    write_eval_log(log, str(path))
    result = cli("import", "--traces", path, "--run-id", "x", "--store", tmp_path / "s")
    assert result.exit_code == 2
    assert "Error: --dataset is required: the inspect traces do not hold the samples' gold" in (
        result.stderr
    )


# ---------------------------------------------------------------- refused, naming the log (#27)


def rewritten(path: Path, out: Path, change) -> Path:
    """The log at ``path`` read by inspect_ai, changed by ``change(log)`` and written again by
    inspect_ai as ``out``."""
    from inspect_ai.log import read_eval_log, write_eval_log

    log = read_eval_log(str(path))
    change(log)
    write_eval_log(log, str(out))
    return out


def with_member_text(path: Path, out: Path, old: str, new: str) -> Path:
    """A copy of an .eval log (a zip file) whose members have the JSON text ``old`` written as
    ``new``, for what inspect_ai's writer never writes (it escapes a lone surrogate). zipfile
    reads inspect_ai's zstd members once inspect_ai.log is imported; the copy is deflated,
    which inspect_ai reads too."""
    import zipfile

    import inspect_ai.log  # noqa: F401

    with zipfile.ZipFile(path) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            data = src.read(info.filename)
            dst.writestr(info.filename, data.replace(old.encode(), new.encode()))
    return out


def refused(log: Path, root: Path) -> list[str]:
    """Import ``log``, which must be refused as bad input with the store untouched: the lines
    of stderr."""
    before = snapshot(root)
    result = cli("import", "--traces", log, "--run-id", "x", "--store", root)
    assert result.exit_code == 2, result.output
    assert snapshot(root) == before
    return result.stderr.splitlines()


def set_epoch(epoch: int):
    def change(log) -> None:
        log.samples[0].epoch = epoch

    return change


@pytest.mark.parametrize(
    ("epoch", "message"),
    [
        # dropped without a word
        (0, "epoch must be an integer from 1 to 1048576"),
        # made a billion trials of missing samples
        (10**9, "epoch must be an integer from 1 to 1048576"),
        # the log has epochs 1 and 2
        (4, "trial 3, but no trace holds trial 2 (trials count from 0 without gaps)"),
    ],
)
def test_an_epoch_out_of_range_or_after_a_gap_is_refused(eval_log, tmp_path, epoch, message):
    log = rewritten(eval_log, tmp_path / "e.eval", set_epoch(epoch))
    error = refused(log, tmp_path / "s")[0]
    assert error == f"Error: e.eval: sample 'add', epoch {epoch}: {message}"


def deep_metadata(log) -> None:
    value: list | int = 1
    for _ in range(150):
        value = [value]
    log.samples[0].metadata["deep"] = value


@pytest.mark.parametrize("suffix", ["eval", "json"])
def test_a_log_beyond_the_json_limits_is_refused_naming_the_log(eval_log, tmp_path, suffix):
    """The .eval form failed after writing, naming the store's journal.jsonl; the .json form
    was told as LangChain traces."""
    log = rewritten(eval_log, tmp_path / f"deep.{suffix}", deep_metadata)
    lines = refused(log, tmp_path / "s")
    assert lines[0] == (
        f"Error: deep.{suffix}: sample 'add', epoch 1: a value nested deeper than 100 levels of "
        "arrays and objects"
    )
    assert lines[1].startswith("Hint: tcbreplay reads JSON nested at most 100 levels deep")
    assert f"read as inspect (an inspect_ai .{suffix} log" in lines[1]


def test_a_lone_surrogate_in_a_log_is_refused(eval_log, tmp_path):
    """It ended in a UnicodeEncodeError from the journal writer."""
    log = with_member_text(eval_log, tmp_path / "s.eval", "What is 2 plus 3?", "2 + \\ud800?")
    assert refused(log, tmp_path / "s")[0] == (
        "Error: s.eval: sample 'add', epoch 1: holds a lone surrogate \\ud800, which is not "
        "valid Unicode"
    )


def test_a_log_that_unpacks_to_far_more_than_its_size_is_refused(eval_log, tmp_path):
    """A zip bomb: a 16 MiB string that zstd writes in a few kilobytes was read whole (400 MB
    from a 400 KB file took 3.5 GB); it is refused after unpacking a little of it."""

    def pad(log) -> None:
        log.samples[0].metadata["pad"] = "a" * 2**24

    log = rewritten(eval_log, tmp_path / "bomb.eval", pad)
    assert log.stat().st_size < 2**17
    lines = refused(log, tmp_path / "s")
    assert lines[0].startswith("Error: bomb.eval: member 'samples/add_epoch_1.json' unpacks to ")
    assert "more than 100 times its " in lines[0]
    assert lines[1].startswith("Hint: tcbreplay reads .eval logs (zip files) whose members ")


def test_the_dialect_reads_a_log_given_as_bytes(tmp_path):
    # here, not in test_dialect_inspect.py: inspect_ai's import (seconds) is paid once a file
    log = write_log(tmp_path / "logs", epochs=1)
    source = inspect_dialect.read(TraceFile(log.name, data=log.read_bytes()), None)
    assert sorted(line.sample_id for line in source.lines) == ["add", "mul"]
    assert source.dataset is not None  # the samples' metadata holds their gold calls
    assert source.tools and {t["name"] for t in source.tools} == {"add_numbers", "multiply_numbers"}


def test_each_model_calls_token_counts_are_its_answers(tmp_path):
    """The log's model events hold each call's usage: every imported sample's tokens were
    null. Per sample they add up to inspect_ai's own model_usage."""
    from inspect_ai.log import read_eval_log

    path = DATA / "inspect" / "mockllm-2-samples-2-epochs.json"
    log = read_eval_log(str(path))
    source = inspect_dialect.read(TraceFile(path.name, data=path.read_bytes()), None)
    for line, sample in zip(source.lines, log.samples, strict=True):
        (usage,) = sample.model_usage.values()
        ai = [m for m in line.messages if m["type"] == "ai"]
        assert all(m["input_tokens"] is not None for m in ai)
        assert sum(m["input_tokens"] for m in ai) == usage.input_tokens
        assert sum(m["output_tokens"] for m in ai) == usage.output_tokens
