#!/usr/bin/env bash
# Whose calls make τ²-bench's telecom reward? There the simulated user acts on its own device,
# and τ² checks gold actions of both sides: the agent's and the user's. Import a τ² results
# file as it is (its domain's tools ship with tcbreplay), score the agent's side, the user's and
# both together, and ask `tcbreplay validity` how well each scoring tracks τ²'s reward.
#
#   examples/tau2_sides.sh RESULTS
#
# RESULTS is a τ²-bench results file, unchanged ({timestamp, info, tasks, simulations}). The run
# goes into the store $TCBREPLAY_STORE (default ./traces) as tau2.
set -euo pipefail

results=${1:?usage: $0 RESULTS}

tcbreplay import --traces "$results" --run-id tau2
for side in agent user both; do
    tcbreplay score tau2 --side "$side" >/dev/null
done
# the outcome defaults to abs(reward - 1) <= 1e-6 (τ²'s success)
for scoring in spec spec_side-user spec_side-both; do
    tcbreplay validity tau2 --scoring "$scoring" --bootstrap 200
done
