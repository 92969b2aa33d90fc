"""The scoring benchmark: synthetic runs at scale, a reference scorer, and the harness."""
