#!/usr/bin/env bash
# Change an agent's system prompt and find out what the change does, without calling a model
# for the turns that stay the same: record once, replay with the new prompt, read where each
# sample diverged, fork the diverged samples live with --then, and compare the fork with its
# parent (`diff`, and `score --gold-run`: the parent's calls as gold).
#
#   examples/replay_a_changed_prompt.sh
#
# It records the built-in benchmark's first 12 samples with the offline sim model (no key,
# no network); a real agent records with --model openai:gpt-4o-mini or the like, and forks
# with the same. The runs go into the store $TCBREPLAY_STORE (default ./traces).
set -euo pipefail

# 1. record once
tcbreplay record --model sim:seed=7,error_rate=0.3 --limit 12 --run-id base --quiet

# 2. the change under test: the recorded system prompt, one sentence longer
python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["system_prompt"]["text"])' \
    "${TCBREPLAY_STORE:-traces}/base/manifest.json" > prompt.txt
echo "Always show your working." >> prompt.txt

# 3. replay with it: every request is answered from the recording while it asks what the
#    recording asked; a sample stops at the first request that differs (exit 1: the change
#    changed something; --allow-divergence makes that 0)
tcbreplay replay base --run-id new-prompt --system-prompt prompt.txt --allow-divergence

# 4. where each sample diverged: turn, component, path, the recorded and replayed values
tcbreplay sql "select sample_id, turn, component, path from divergences
               where run_id = 'new-prompt' order by sample_id limit 3"

# 5. fork: the same replay, each diverged sample going on live with a model (sim here)
tcbreplay replay base --run-id new-prompt-live --system-prompt prompt.txt \
    --then sim:seed=11,error_rate=0.3 --allow-divergence --quiet

# 6. the fork against its parent: the metrics side by side, and the fork's calls scored
#    with the parent's calls as gold (a scoring of its own, spec_gold-base)
tcbreplay diff base new-prompt-live
tcbreplay score new-prompt-live --gold-run base
