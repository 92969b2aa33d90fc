#!/usr/bin/env bash
# Score an inspect_ai eval log with tcbreplay: import it as a run (each epoch a trial), score
# it, and list the samples that went worst.
#
#   examples/score_inspect_log.sh LOG [DATASET]
#
# LOG is an inspect_ai log (.eval or .json). Gold calls come from DATASET, a tcbreplay dataset
# keyed by sample id, or without it from each sample's metadata (`target`, or
# `tool_call_names` and `tool_call_args`). Needs inspect_ai: pip install 'tcbreplay[inspect]'.
# The run goes into the store $TCBREPLAY_STORE (default ./traces), as $RUN_ID (default
# inspect); an existing run of that id is refused.
set -euo pipefail

log=${1:?usage: $0 LOG [DATASET]}
run=${RUN_ID:-inspect}
dataset=()
if [[ $# -ge 2 ]]; then dataset=(--dataset "$2"); fi

# the tools are those the log's model was offered; the format is told from the file
tcbreplay import --traces "$log" "${dataset[@]}" --run-id "$run"
tcbreplay score "$run"
tcbreplay query worst_samples -p run_id="$run" -p limit=5
