#!/usr/bin/env bash
# Does each metric track τ-bench's own verdict? Import a τ-bench results file (its reward says
# whether each trajectory solved its task), score it with the airline domain's state-changing
# tools given the role write, and ask `tcbreplay validity` how well each metric separates the
# solved trajectories from the others (AUC and r, with bootstrap intervals).
#
#   examples/tau_bench_validity.sh RESULTS TOOLS
#
# RESULTS is a τ-bench results file, unchanged (a JSON list of {task_id, trial, reward, info,
# traj}); TOOLS the domain's tool schemas (τ-bench's airline tools in OpenAI's form). The run
# goes into the store $TCBREPLAY_STORE (default ./traces) as tau.
set -euo pipefail

results=${1:?usage: $0 RESULTS TOOLS}
tools=${2:?usage: $0 RESULTS TOOLS}
# the airline tools that change the database, which τ-bench's reward judges
write=book_reservation,cancel_reservation,update_reservation_flights
write+=,update_reservation_passengers,update_reservation_baggages,send_certificate

tcbreplay import --format tau-bench --traces "$results" --tools "$tools" --run-id tau
tcbreplay score tau --role write="$write"
# the outcome defaults to abs(reward - 1) <= 1e-6 (τ-bench's solved)
tcbreplay validity tau --bootstrap 500
