#!/usr/bin/env bash
# Score an agent's production traces, exported from LangSmith or Langfuse, against a dataset's
# gold calls: import them as a run, score it, and list the samples that went worst.
#
#   examples/score_production_traces.sh TRACES DATASET TOOLS
#
# TRACES is LangSmith's runs (Client.list_runs() as JSON Lines, the SDK's posted payloads, a
# bulk export's Parquet file) or Langfuse's observations (its blob storage export: JSON Lines,
# JSON or Parquet); the format is told from the file. Each trace is matched to a DATASET sample
# by an id it carries (LangSmith's reference_example_id, the trace's id) or by its question; a
# question asked twice is two trials of its sample. TOOLS is module:attr or a JSON file of the
# tools' schemas. The run goes into the store $TCBREPLAY_STORE (default ./traces), as $RUN_ID
# (default production); an existing run of that id is refused.
set -euo pipefail

traces=${1:?usage: $0 TRACES DATASET TOOLS}
dataset=${2:?usage: $0 TRACES DATASET TOOLS}
tools=${3:?usage: $0 TRACES DATASET TOOLS}
run=${RUN_ID:-production}

tcbreplay import --traces "$traces" --dataset "$dataset" --tools "$tools" --run-id "$run"
tcbreplay score "$run"
tcbreplay query worst_samples -p run_id="$run" -p limit=5
