"""What a store may be (``Store(root)``, every command's ``--store``): a folder, a ``file://``
URL of one, or a URL of object storage of the schemes listed; anything else, and any place
holding a wildcard, is refused before anything is written, read or deleted, and before any
filesystem is made. (Object storage's own URLs: test_store_s3.py.)"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tcbreplay._store.runs import Store
from tcbreplay._store.store_urls import STORE_SCHEMES, WILDCARDS, local_store_path
from tcbreplay.errors import InputError

# URLs of schemes no store can be on: gone with the process (memory), read-only or
# unsuited (data, github, http), or filesystems tcbreplay does not write (ftp, hdfs);
# and fsspec's chained URLs
REFUSED = [
    ("memory://x/y", "--store memory://...: memory:// is not a store"),
    ("ftp://bkt/p", "--store ftp://...: ftp:// is not a store"),
    ("github://a/b", "--store github://...: github:// is not a store"),
    ("hdfs://a/b", "--store hdfs://...: hdfs:// is not a store"),
    ("http://127.0.0.1:1/bkt", "--store http://...: http:// is not a store"),
    ("https://x/y", "--store https://...: https:// is not a store"),
    ("data://x/y", "--store data://...: data:// is not a store"),
    ("HTTPS://x/y", "--store https://...: https:// is not a store"),
    ("simplecache::s3://bkt/st1", "--store simplecache::...: a chained URL"),
    ("simplecache::/tmp/x", "--store simplecache::...: a chained URL"),
]


@pytest.mark.parametrize(("url", "says"), REFUSED)
def test_a_url_of_another_scheme_is_refused_before_any_filesystem_is_made(url, says):
    before = set(sys.modules)
    with pytest.raises(InputError) as caught:
        Store(url)
    assert str(caught.value).startswith(says)
    for scheme in STORE_SCHEMES:
        assert f"{scheme}://" in str(caught.value.hint)
    # nothing imported to decide it: no fsspec filesystem, no optional backend
    assert not [name for name in set(sys.modules) - before
                if name.split(".")[0] in ("fsspec", "upath", "s3fs", "pyarrow")]  # fmt: skip


def test_a_url_that_fsspec_would_cut_at_a_double_colon_is_refused():
    # UPath("s3://bkt/a::b") is s3://bkt/a: the runs would be stored there
    with pytest.raises(InputError, match=r"^--store s3://\.\.\.: '::' chains URLs in fsspec"):
        Store("s3://bkt/a::b")


def test_a_refused_url_is_not_shown_past_its_scheme():
    with pytest.raises(InputError) as caught:
        Store("ftp://user:Zq8vX3kP@host/p")
    assert "Zq8vX3kP" not in str(caught.value) + str(caught.value.hint)


@pytest.mark.parametrize("char", sorted(WILDCARDS))
def test_a_local_store_holding_a_wildcard_is_refused(tmp_path, char):
    # DuckDB read every store the pattern matched as this one (a traceback where one did
    # not match); fsspec would delete them all
    with pytest.raises(InputError) as caught:
        Store(tmp_path / f"l{char}1")
    assert str(caught.value) == (
        f"--store {tmp_path}/l{char}1: {char!r} is a wildcard to the libraries that read and "
        "delete the store, which would take other stores' runs for its own"
    )
    assert "* ? [ ]" in str(caught.value.hint)
    assert list(tmp_path.iterdir()) == []


def test_a_store_in_a_folder_holding_a_wildcard_is_refused(tmp_path, monkeypatch):
    # DuckDB reads a run's files by their absolute path: a wildcard above the store counts
    (tmp_path / "a[1]").mkdir()
    monkeypatch.chdir(tmp_path / "a[1]")
    with pytest.raises(InputError, match=r"^--store traces \(its folder .*/a\[1\]/traces\): '\['"):
        Store("traces")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "a[1]")
    with pytest.raises(InputError, match="'\\[' is a wildcard"):
        Store(link / "traces")
    assert list((tmp_path / "a[1]").iterdir()) == []


@pytest.mark.parametrize("char", ["\t", "\n", "\x1b", "\x7f"])
def test_a_store_named_with_a_control_character_is_refused(tmp_path, char):
    # the commands printed to run next showed a tab as \x09 inside quotes: pasted, another store
    with pytest.raises(InputError) as caught:
        Store(tmp_path / f"a{char}b")
    assert str(caught.value) == (
        "--store: the store's name holds a control character (a tab, a newline...)"
    )
    assert list(tmp_path.iterdir()) == []


def test_braces_are_no_wildcard(tmp_path):
    assert Store(tmp_path / "l{a,b}").root == tmp_path / "l{a,b}"


@pytest.mark.parametrize(
    "form",
    ["file://{}", "FILE://{}", "file://localhost{}", "file:{}", "local://{}"],
)
def test_a_file_url_is_the_folder_it_names(tmp_path, form):
    folder = tmp_path / "my store"
    url = form.format(folder.as_posix().replace(" ", "%20"))
    assert local_store_path(url) == str(folder)
    assert Store(url).root == folder


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("file://otherhost/x", "--store file://...: a file URL names a folder of this machine"),
        ("file://", "--store file://...: a file URL names a folder of this machine"),
        ("file:///tmp/x?mode=ro", "--store file:///tmp/x?mode=ro: the URL holds options"),
        ("file:///tmp/x%2A", "--store file:///tmp/x%2A (its folder /tmp/x*): '*' is a wildcard"),
    ],
)
def test_a_file_url_that_names_no_folder_here_is_refused(url, says):
    with pytest.raises(InputError, match=f"^{re.escape(says)}"):
        Store(url)


def test_a_folder_whose_name_reads_as_a_scheme_is_a_folder(tmp_path, monkeypatch):
    # Arrow took foo:bar/r/messages.parquet for a URL of a scheme foo (a traceback midway)
    monkeypatch.chdir(tmp_path)
    root = Store("foo:bar").root
    assert root == tmp_path / "foo:bar" and root.is_absolute()
    assert Store("traces").root == Path("traces")  # other relative stores stay as given


def test_an_endpoints_query_string_is_never_shown(monkeypatch):
    """The endpoint's user info was redacted in the error that names it, a token in its
    query string (of a name no secret has) was not."""
    from helpers import cli

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://user:EPSECRET12@127.0.0.1:5958/?tok=QSECRET12")
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "test")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    s3fs = pytest.importorskip("s3fs")
    # fsspec keeps the filesystems it made with the endpoint of their day: one made by an
    # earlier test in this process would be asked instead of this endpoint
    s3fs.S3FileSystem.clear_instance_cache()
    try:
        result = cli("runs", "--store", "s3://bucket/prefix")
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith("Error: s3://bucket/prefix: ")
    assert "?..." in result.stderr
    assert "QSECRET12" not in result.output and "EPSECRET12" not in result.output
