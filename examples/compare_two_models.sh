#!/usr/bin/env bash
# Compare two models on the same samples: store each one's traces as a run, score both, and
# let `tcbreplay diff` say what changed, with paired bootstrap intervals and the samples that
# regressed or improved.
#
#   examples/compare_two_models.sh DATASET TOOLS TRACES_A TRACES_B
#
# TRACES_A and TRACES_B are JSON Lines traces of the same DATASET (LangChain, OpenAI or
# Anthropic messages, a sample a line); TOOLS a JSON file of tool schemas. Runs recorded with
# tcbreplay compare the same way, without the imports:
#
#   tcbreplay record --model openai:gpt-4o-mini --run-id model-a
#   tcbreplay record --model anthropic:claude-sonnet-4-5 --run-id model-b
#
# The runs go into the store $TCBREPLAY_STORE (default ./traces) as model-a and model-b.
set -euo pipefail

dataset=${1:?usage: $0 DATASET TOOLS TRACES_A TRACES_B}
tools=${2:?usage: $0 DATASET TOOLS TRACES_A TRACES_B}
traces_a=${3:?usage: $0 DATASET TOOLS TRACES_A TRACES_B}
traces_b=${4:?usage: $0 DATASET TOOLS TRACES_A TRACES_B}

tcbreplay import --dataset "$dataset" --tools "$tools" --traces "$traces_a" --run-id model-a \
    --model model-a
tcbreplay import --dataset "$dataset" --tools "$tools" --traces "$traces_b" --run-id model-b \
    --model model-b
# B − A on the samples both runs hold (each run scored in memory when it was not scored yet;
# `tcbreplay score` keeps scores); --format json gives every sample's deltas
tcbreplay diff model-a model-b
