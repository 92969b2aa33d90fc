"""How long and how often an S3 store's client waits and tries before it gives up, and how
often a failed request was tried, as a hint says it."""

from __future__ import annotations

import os
from typing import Any

# An S3 store's client gives up on an endpoint that accepts connections and never answers
# (a stopped server, a proxy, a partition) after CONNECT_S to connect or READ_S without a byte,
# and tries a request at most ATTEMPTS times (botocore's standard retries, unless the
# environment's AWS_MAX_ATTEMPTS or AWS_RETRY_MODE say otherwise); s3fs tries again on its own
# only S3FS_RETRIES times (an attribute of its instances, not an option). With botocore's
# defaults under s3fs's (60 s, 5 attempts, 5 tries) a silent endpoint held a command for about
# 25 minutes; now for about 3 (2 min 49 s for `runs`).
S3_CONNECT_S = 10
S3_READ_S = 20
S3_ATTEMPTS = 3
S3FS_RETRIES = 2


def client_options(scheme: str) -> dict[str, Any]:
    """The options a store's filesystem of ``scheme`` is made with (see :data:`S3_READ_S`)."""
    if scheme not in ("s3", "s3a"):
        return {}
    config: dict[str, Any] = {"connect_timeout": S3_CONNECT_S, "read_timeout": S3_READ_S}
    if not {"AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE"} & os.environ.keys():
        config["retries"] = {"max_attempts": S3_ATTEMPTS, "mode": "standard"}
    return {"config_kwargs": config}


# the attempts botocore makes of a request in each retry mode, unless AWS_MAX_ATTEMPTS says
_MODE_ATTEMPTS = {"legacy": 5, "standard": 3, "adaptive": 3}


def attempts() -> str:
    """How often a request was tried (see :func:`client_options`): S3_ATTEMPTS, or what the
    environment's AWS_MAX_ATTEMPTS or AWS_RETRY_MODE say instead."""
    given = os.environ.get("AWS_MAX_ATTEMPTS", "").strip()
    if given.isdigit() and int(given) > 0:
        return f"{int(given)} times (AWS_MAX_ATTEMPTS)"
    mode = os.environ.get("AWS_RETRY_MODE", "").strip().lower()
    if mode in _MODE_ATTEMPTS:
        return f"{_MODE_ATTEMPTS[mode]} times (AWS_RETRY_MODE {mode})"
    if {"AWS_MAX_ATTEMPTS", "AWS_RETRY_MODE"} & os.environ.keys():
        return "as often as AWS_MAX_ATTEMPTS and AWS_RETRY_MODE say"
    return f"{S3_ATTEMPTS} times"
