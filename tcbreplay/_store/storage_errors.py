"""Failures of object storage (credentials, network, permissions, the service's answers) in a
few words and a hint, with nothing secret quoted."""

from __future__ import annotations

import re
from typing import Any

from tcbreplay._secrets import redact
from tcbreplay._store import s3_limits
from tcbreplay.errors import first_line

# the libraries whose exceptions are failures of the object store (its credentials, its
# network, its answers), by the module they come from
_STORAGE_MODULES = ("botocore", "aiobotocore", "aiohttp", "s3fs", "gcsfs", "google", "adlfs",
                    "azure", "fsspec")  # fmt: skip
_CREDENTIALS_HINT = (
    "tcbreplay takes no credentials: give them to the cloud's own library, in its environment "
    "or config files (for S3: AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
    "~/.aws/credentials; AWS_ENDPOINT_URL_S3 for another S3 service)"
)


# an exception of a storage library as a traceback's last line names it
_RAISED = re.compile(
    r"^(?:[A-Za-z_][\w.]*\.)?(\w*(?:Connection|Connector|Timeout|Credentials|Endpoint)\w*"
    r"(?:Error|Exception)):\s*(.+)$",
    re.MULTILINE,
)


# how a refusal of the credentials is said (see storage_failure)
ACCESS_DENIED = "access denied"


def storage_failure(exc: BaseException, place: str = "s3://") -> tuple[str, str | None] | None:
    """A failure of object storage in a few words, and a hint; None for any other exception.
    (Asked only of what a remote place's operations raised: any OSError is the store's.)
    ``place``: the URL it was asked of, whose scheme (``s3a://``) a hint repeats."""
    module = type(exc).__module__ or ""
    name = type(exc).__name__
    if module.split(".")[0] in ("duckdb", "_duckdb"):
        # DuckDB reading through the store's filesystem: the storage library's exception
        # is inside its text, with the traceback DuckDB copied
        raised = _RAISED.findall(str(exc))
        if not raised:
            return None
        name, text = raised[-1]
    elif isinstance(exc, OSError) or module.split(".")[0] in _STORAGE_MODULES:
        text = first_line(exc) or name
    elif _no_content_length(exc):
        return (
            "the S3 server answered a HEAD request without a Content-Length (an object's "
            "size), which tcbreplay needs",
            "is AWS_ENDPOINT_URL_S3 an S3-compatible server, not a proxy that drops the header?",
        )
    elif isinstance(exc, ValueError) and _raised_in(exc, "_retrieve_credentials_using"):
        # botocore reading what the profile's credential_process wrote (JSON's error quotes
        # no text of it)
        return (f"the AWS profile's credential_process wrote no JSON credentials ({exc})",
                "run the profile's credential_process yourself: it is to write the JSON the "
                "AWS CLI's documentation of credential_process gives")  # fmt: skip
    elif isinstance(exc, ValueError) and _raised_in(exc, "create_endpoint"):
        # botocore's, making the client: maybe the URL as given, with a user and password
        text = _USER_INFO.sub("[redacted]@", first_line(exc) or name)
        return (f"the S3 endpoint is not a valid http:// or https:// URL ({text})",
                "set AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or the profile's endpoint_url to "
                "http(s)://HOST[:PORT]")  # fmt: skip
    else:
        return None
    # an endpoint's query string may carry a token of any name (redaction knows the names
    # of secrets, not every name a service gives one): left out, as servers' logs leave it
    text = _URL_QUERY.sub(r"\1?...", text)
    answer = s3_answer(exc)
    error = answer.get("Error", {})
    if error.get("Code") == "NoSuchBucket":  # (s3fs says only "...bucket does not exist")
        bucket = error.get("BucketName")
        said = f"no such bucket ({bucket})" if isinstance(bucket, str) else "no such bucket"
        return said, no_bucket_hint(place)
    status = answer.get("ResponseMetadata", {}).get("HTTPStatusCode")
    if error.get("Code") in _SLOW_DOWN or (isinstance(status, int) and status >= 500):
        # (tried again already, by botocore and s3fs: what is left is to wait)
        said = " ".join(str(part) for part in (status, error.get("Code")) if part)
        said += f" ({error['Message']})" if error.get("Message") else ""
        what = "asked to slow down" if error.get("Code") in _SLOW_DOWN else "failed for a moment"
        return _URL_QUERY.sub(r"\1?...", f"the store {what}: {said}"), (
            f"a passing failure: each request was tried {s3_limits.attempts()}; run the command "
            "again in a moment"
        )
    process = _credential_process_failure(exc)
    if process is not None:
        return process
    if "Credential" in name or "credential" in text.lower():
        return text, _CREDENTIALS_HINT
    if isinstance(exc, PermissionError) or "AccessDenied" in text or "Forbidden" in text:
        return f"{ACCESS_DENIED} ({text})", _CREDENTIALS_HINT
    if "Endpoint" in name or "connect" in text.lower():
        return text, "is the network up, and the endpoint right (AWS_ENDPOINT_URL_S3)?"
    if "timeout" in name.lower() or "timeout" in text.lower():
        return text, (
            f"the store did not answer within {s3_limits.S3_READ_S} s, {s3_limits.attempts()}: is "
            "its endpoint up (AWS_ENDPOINT_URL_S3)? AWS_MAX_ATTEMPTS sets how often to try"
        )
    return text, None


# the most of what a failed credential_process wrote that an error quotes
PROCESS_SHOWN_CHARS = 100


def _credential_process_failure(exc: BaseException) -> tuple[str, str] | None:
    """The failure of the AWS profile's ``credential_process`` (botocore's error quotes all it
    wrote to stderr, which may hold secrets redaction knows no name or form of): its first
    line, redacted and cut short; None for any other exception."""
    details = getattr(exc, "kwargs", None)
    if type(exc).__name__ != "CredentialRetrievalError" or not isinstance(details, dict):
        return None
    if details.get("provider") != "custom-process":  # (botocore's name for credential_process)
        return None
    said = redact(next((line.strip() for line in str(details.get("error_msg") or "").splitlines()
                        if line.strip()), ""))  # fmt: skip
    if len(said) > PROCESS_SHOWN_CHARS:
        said = said[: PROCESS_SHOWN_CHARS - 3] + "..."
    return (f"the AWS profile's credential_process failed{f' ({said})' if said else ''}",
            "run the profile's credential_process yourself to see all it wrote (tcbreplay "
            "quotes its first line only: it may write secrets)")  # fmt: skip


def _no_content_length(exc: BaseException) -> bool:
    """Whether ``exc`` is s3fs's KeyError at a HEAD answered without a ``Content-Length``."""
    return isinstance(exc, KeyError) and exc.args == ("ContentLength",) and _raised_in(exc, "_info")


def _raised_in(exc: BaseException, function: str) -> bool:
    """Whether ``exc`` was raised inside a function of that name (or one it called)."""
    frame = exc.__traceback__
    while frame is not None:
        if frame.tb_frame.f_code.co_name == function:
            return True
        frame = frame.tb_next
    return False


# a URL's user (and password) before its host, with a scheme or without
_USER_INFO = re.compile(r"(?<![^\s/])[^\s/]*@")

# a URL's query string, after its scheme, host and path
_URL_QUERY = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s?#'\"`<>]*)\?[^\s#'\"`<>]*")

# S3's answers that it takes too many requests (HTTP 503; others' services' words for it)
_SLOW_DOWN = frozenset({"SlowDown", "Throttling", "ThrottlingException", "TooManyRequests",
                        "RequestLimitExceeded"})  # fmt: skip


def no_bucket_hint(place: str) -> str:
    """The hint for a store whose bucket does not exist, in the scheme of ``place``."""
    scheme = place.split("://", 1)[0]
    return (
        f"make it with the cloud's own tools, or give --store {scheme}://BUCKET/PREFIX of one "
        "that exists"
    )


def s3_answer(exc: BaseException) -> dict[str, Any]:
    """What S3 answered that ``exc`` (botocore's, or s3fs's OSError made of it) is of: its
    ``Error`` (``Code``, ``Message``...) and ``ResponseMetadata`` (``HTTPStatusCode``); empty
    for any other exception."""
    for raised in (exc, exc.__cause__):
        answer = getattr(raised, "response", None)
        if isinstance(answer, dict) and isinstance(answer.get("Error"), dict):
            return answer
    return {}
