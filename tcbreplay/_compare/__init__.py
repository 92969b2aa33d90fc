"""Comparing scores: two runs (diff), metrics against each sample's outcome (validity), stored
scores against the raw traces (audit). Scores what it compares in memory when needed."""
