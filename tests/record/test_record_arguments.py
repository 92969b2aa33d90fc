"""record_run's arguments as the library's users pass them: a misspelt runner setting is a
typed error naming it (a TypeError before), and one sample id as a string is that sample (its
letters before: "--sample-id 'h': the dataset has no sample")."""

from __future__ import annotations

import pytest

from tcbreplay._inputs.benchmarks import load_inputs
from tcbreplay._record.models import parse_model
from tcbreplay._record.runner import record_run
from tcbreplay._store.runs import Store
from tcbreplay.errors import InputError


def test_a_misspelt_runner_setting_is_an_input_error_naming_it(tmp_path):
    with pytest.raises(InputError, match=r"options: not a runner setting: 'wrokers'") as caught:
        record_run(load_inputs("tool-call"), parse_model("sim"), Store(tmp_path / "s"),
                   options={"wrokers": 8})  # fmt: skip
    assert "workers" in (caught.value.hint or "")
    assert not (tmp_path / "s").exists()


def test_one_sample_id_as_a_string_is_that_sample(tmp_path):
    summary = record_run(load_inputs("tool-call"), parse_model("sim"), Store(tmp_path / "s"),
                         run_id="one", sample_ids="tell-a-joke")  # fmt: skip
    assert summary.recorded == 1
