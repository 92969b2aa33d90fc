"""The command group: typed errors become one ``Error:`` line, and helpers the commands share."""

from __future__ import annotations

import errno
import importlib
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from tcbreplay._secrets import redact
from tcbreplay._store.files import reason
from tcbreplay._version import __version__
from tcbreplay.errors import (
    MEMORY_HINT,
    TcbReplayError,
    TcbReplayWarning,
    memory_words,
    out_of_memory,
)

STORE_ENVVAR = "TCBREPLAY_STORE"
# what every command can print its results as (tcbreplay._cli.render prints them)
FORMATS = ("table", "json", "jsonl", "csv", "markdown")
# operating-system errors that are failures of the place a command reads or writes
PLACE_ERRORS = frozenset(
    {
        errno.ENOSPC,
        errno.EDQUOT,
        errno.EFBIG,
        errno.EROFS,
        errno.EACCES,
        errno.EPERM,
        errno.EIO,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.ENAMETOOLONG,
        errno.ELOOP,
        errno.EMFILE,
        errno.ENFILE,
    }
)


class _StorePath(click.Path):
    """A store directory (a ``file://`` URL is the folder it names), or a URL of object
    storage (kept as the URL it is): a bad one is blamed on the variable when it came from
    there, and on the option otherwise."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        from tcbreplay._store.store_urls import local_store_path

        if _given_before_command(ctx, param):
            return value  # `tcbreplay --store X CMD`: X is used, and checked there
        local = local_store_path(value)  # a folder's path, or a file:// URL's
        if local is None:
            return value  # a URL: accepted or refused, as it is read, by the store: Store(URL)
        path = super().convert(local, param, ctx)
        # a folder under a file can be neither read nor made: said here, for every command
        for parent in Path(os.fsdecode(path)).parents:
            if parent.exists():
                if not parent.is_dir():
                    self.fail(f"{str(parent)!r} is a file, not a folder", param, ctx)
                break
        return path

    def fail(self, message: str, param: Any = None, ctx: Any = None) -> Any:
        source = ctx.get_parameter_source(param.name) if ctx and param else None
        env = source is click.core.ParameterSource.ENVIRONMENT
        hint = STORE_ENVVAR if env else "'--store'"
        raise click.BadParameter(message, ctx=ctx, param=param, param_hint=hint)


def _given_before_command(ctx: click.Context | None, param: click.Parameter | None) -> bool:
    """Whether the command's option was not given, but the group's was (``tcbreplay
    --store X runs``): the command line before the command beats the environment."""
    if ctx is None or param is None or ctx.parent is None or param.name is None:
        return False
    source = ctx.get_parameter_source(param.name)
    if source is click.core.ParameterSource.COMMANDLINE:
        return False
    return ctx.find_root().params.get(param.name) is not None


def _from_group(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """The group's value of an option the command did not get on its command line."""
    if _given_before_command(ctx, param):
        return ctx.find_root().params[param.name or ""]
    return value


def _store_from_group(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """The command's store (:func:`_from_group`); one given both before the command and after
    it is a usage error unless both name the same place (a store's own URL or folder)."""
    before = ctx.find_root().params.get(param.name or "")
    given = ctx.get_parameter_source(param.name or "") is click.core.ParameterSource.COMMANDLINE
    if ctx.parent is not None and before is not None and given and not _same_store(before, value):
        raise click.UsageError(
            f"--store given twice: {str(before)!r} before the command and {str(value)!r} "
            "after it; give one store",
            ctx=ctx,
        )
    value = _from_group(ctx, param, value)
    global _COMMAND_STORE
    _COMMAND_STORE = value
    return value


# the store the running command reads (its --store), for an error of its object storage that
# reached the command line's edge (see _Cli.invoke)
_COMMAND_STORE: Any = None


def _store_failure(exc: BaseException) -> tuple[str, str | None] | None:
    """A failure of the command's store on object storage (the network lost in the middle
    of a command) as the one line and hint that say it; None for anything else."""
    if _COMMAND_STORE is None or "://" not in str(_COMMAND_STORE):
        return None
    if type(exc).__module__ == "builtins" and not isinstance(exc, ConnectionError | TimeoutError):
        return None  # a local file's error, not the network's
    if isinstance(exc, BrokenPipeError):  # the output's reader gone (| head), as locally
        return None
    from tcbreplay._store.storage_errors import storage_failure

    found = storage_failure(exc, str(_COMMAND_STORE))
    if found is None:
        return None
    return f"{str(_COMMAND_STORE).rstrip('/')}: {found[0]}", found[1]


def _same_store(first: Any, second: Any) -> bool:
    """Whether two ``--store`` values name one store (a URL is refused here, unshown, as it
    would be by the command, when it holds credentials)."""
    from tcbreplay._store.objects import is_remote
    from tcbreplay._store.store_urls import store_root

    roots = store_root(first), store_root(second)
    if is_remote(roots[0]) or is_remote(roots[1]):
        return str(roots[0]) == str(roots[1])
    return roots[0].resolve() == roots[1].resolve()


def _store_of(ctx: click.Context) -> Any:
    """The store a command line names, as far as it is parsed (for shell completion)."""
    from tcbreplay._store.runs import Store

    store = ctx.params.get("store") or ctx.find_root().params.get("store")
    return Store(store or os.environ.get(STORE_ENVVAR) or "traces")


def _run_dirs(ctx: click.Context) -> list[str]:
    """The run ids of the store a command line names (for shell completion)."""
    try:
        return [run.run_id for run in _store_of(ctx).runs()]
    except OSError:
        return []


def complete_run_id(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[click.shell_completion.CompletionItem]:
    """Shell completion of a RUN_ID: the runs in the store."""
    from click.shell_completion import CompletionItem

    return [CompletionItem(r) for r in _run_dirs(ctx) if r.startswith(incomplete)]


def complete_scoring(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[click.shell_completion.CompletionItem]:
    """Shell completion of --scoring: the scorings stored for the command's runs."""
    from click.shell_completion import CompletionItem

    store = _store_of(ctx)
    # the runs named so far (click does not parse them when --scoring is the last word)
    run_ids = [ctx.params[k] for k in ("run_id", "run_a", "run_b") if ctx.params.get(k)]
    try:
        run_dirs = [store.run_dir(r) for r in run_ids] or [r.dir for r in store.runs()]
    except OSError:
        return []
    names = {p.parent.name for d in run_dirs for p in (d / "scores").glob("*/summary.json")}
    return [CompletionItem(n) for n in sorted(names) if n.startswith(incomplete)]


STORE_HELP = "Trace store: a directory, or a URL of object storage (s3://BUCKET/PREFIX)."
STORE_OPTION = click.option(
    "--store",
    type=_StorePath(file_okay=False, path_type=Path),
    default="traces",
    show_default=True,
    envvar=STORE_ENVVAR,
    show_envvar=True,
    callback=_store_from_group,
    help=STORE_HELP,
)


class _FormatChoice(click.Choice):
    """The output formats; ``text`` is taken as ``table`` (``audit verify`` called it so)."""

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        return super().convert("table" if value == "text" else value, param, ctx)


FORMAT_HELP = "How to print the results: a table (for people), or json, jsonl, csv, markdown."
# how every command prints its results (one definition; `tcbreplay --format X CMD` too)
FORMAT_OPTION = click.option(
    "--format",
    "fmt",
    type=_FormatChoice(FORMATS),
    default=None,
    callback=lambda ctx, param, value: _from_group(ctx, param, value) or "table",
    help=FORMAT_HELP + "  [default: table]",
)


def output_format(ctx: click.Context | None = None) -> str:
    """The output format given before the command (for commands whose own --format names
    the files they read or write, such as import)."""
    ctx = ctx or click.get_current_context()
    return ctx.find_root().params.get("fmt") or "table"


class KnownCommand(click.Command):
    """Usage errors that name the command they belong to (Click's parser raises some
    without it, and the hint names the command's help)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            exc.ctx = exc.ctx or ctx
            raise


class _Cli(KnownCommand, click.Group):
    """Turn typed errors, and usage errors, into one ``Error:`` line (plus a hint) and an
    exit code; load each command's module when the command is asked for (click's lazily
    loading group), so that ``tcbreplay score`` imports the score command alone."""

    command_class = KnownCommand

    def __init__(self, *args: Any, lazy_commands: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # a command's name: the module under tcbreplay._cli that registers it on this group
        self.lazy_commands = lazy_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            # an unknown name loads every command: click suggests the close names it holds
            names = [cmd_name] if cmd_name in self.lazy_commands else list(self.lazy_commands)
            for name in names:
                importlib.import_module(f"tcbreplay._cli.{self.lazy_commands[name]}")
        return self.commands.get(cmd_name)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `tcbreplay`: the help
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:  # an unknown option, a missing argument, a bad value
            click.echo(f"Error: {_shown(exc.format_message())}", err=True)
            if exc.ctx is not None:
                click.echo(f"Hint: see {exc.ctx.command_path} --help", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"Error: {_shown(exc.format_message())}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("Aborted.", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)

    def invoke(self, ctx: click.Context) -> Any:
        global _COMMAND_STORE
        _COMMAND_STORE = None  # (set by the command's --store)
        try:
            with warnings.catch_warnings():
                _show_warnings_as_lines()
                return super().invoke(ctx)
        except TcbReplayError as exc:
            for line in _shown(str(exc)).splitlines() or [type(exc).__name__]:
                click.echo(f"Error: {line}", err=True)
            if exc.hint:
                click.echo(f"Hint: {_shown(exc.hint)}", err=True)
            ctx.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            ctx.exit(130)
        except OSError as exc:
            if isinstance(exc, BrokenPipeError) and _output_gone():
                # the output's reader went away (| head): it read what it wanted. Exit 0,
                # as when the output fit in the pipe before it left (exit 1 came or not by
                # the timing of the two)
                ctx.exit(0)
            # the place read or written failed (a disk full, a folder read-only), not
            # tcbreplay: one line naming it; the library names what it writes itself
            if exc.errno not in PLACE_ERRORS:
                self._exit_on_store_failure(ctx, exc)
                raise
            where = f"{exc.filename}: " if exc.filename else ""
            click.echo(f"Error: {where}{reason(exc)}", err=True)
            ctx.exit(1)
        except Exception as exc:
            if out_of_memory(exc):  # the machine's limit, not a bug: one line, no traceback
                doing = f"running tcbreplay {ctx.invoked_subcommand or ''}".rstrip()
                click.echo(f"Error: {_shown(memory_words(exc, doing))}", err=True)
                click.echo(f"Hint: {MEMORY_HINT}", err=True)
                ctx.exit(1)
            self._exit_on_store_failure(ctx, exc)
            raise

    @staticmethod
    def _exit_on_store_failure(ctx: click.Context, exc: BaseException) -> None:
        """Exit 1 with one line when ``exc`` is a failure of the command's object storage
        that no step of the library said in its own words (the network lost mid-command)."""
        found = _store_failure(exc)
        if found is not None:
            click.echo(f"Error: {_shown(found[0])}", err=True)
            if found[1]:
                click.echo(f"Hint: {_shown(found[1])}", err=True)
            ctx.exit(1)


def _output_gone() -> bool:
    """Whether this process's stdout or stderr is a pipe whose reader has gone (poll's error
    on its writing end), not a pipe of the library's own (a child process's)."""
    import select

    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):  # (a test's capture, a closed stream)
            continue
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0)):
            return True
    return False


def _shown(text: str) -> str:
    """``text`` as an ``Error:``, ``Hint:`` or ``Warning:`` line shows it: secrets
    redacted (an error may quote what a provider answered, and a provider may quote its
    key) and terminal escapes from trace data escaped (lines stay lines)."""
    from tcbreplay._cli.render import printable

    return "\n".join(printable(line) for line in redact(text).split("\n"))


def _show_warnings_as_lines() -> None:
    """Print tcbreplay's warnings as one ``Warning:`` line each on stderr (others as usual)."""
    shown = warnings.showwarning

    def show(message, category, filename, lineno, file=None, line=None) -> None:
        if issubclass(category, TcbReplayWarning):
            click.echo(f"Warning: {_shown(str(message))}", err=True)
        else:
            shown(message, category, filename, lineno, file, line)

    warnings.simplefilter("always", TcbReplayWarning)
    warnings.showwarning = show


# each command's module under tcbreplay._cli (which registers it on main), imported when the
# command is run or listed: `tcbreplay score` imports the score command's alone
COMMAND_MODULES = {
    "audit": "audit",
    "catalog": "catalog",
    "collect": "collect",
    "diff": "diff",
    "export": "export",
    "import": "import_",
    "query": "query",
    "record": "record",
    "replay": "replay",
    "report": "report",
    "runs": "runs",
    "score": "score",
    "serve": "serve",
    "sql": "sql",
    "validity": "validity",
}


@click.group(
    cls=_Cli,
    context_settings={"help_option_names": ["-h", "--help"]},
    lazy_commands=COMMAND_MODULES,
)
@click.version_option(__version__, prog_name="tcbreplay")
@click.option(
    "--store",
    type=_StorePath(file_okay=False, path_type=Path),
    help=f"{STORE_HELP} For every command (default: traces, or ${STORE_ENVVAR}).",
)
@click.option(
    "--format", "fmt", type=_FormatChoice(FORMATS), help=f"{FORMAT_HELP} For every command."
)
def main(store: Path | None, fmt: str | None) -> None:
    """Record tool-calling agent traces once; score them offline as often as you like.

    --store and --format may be given before the command or after it.

    \b
    Shell completion (bash; zsh_source, fish_source for those shells):
      eval "$(_TCBREPLAY_COMPLETE=bash_source tcbreplay)"
    """


class Stopped:
    """How a block under :func:`sigterm_as_ctrl_c` was stopped: the exit code a stopped
    command gives is the shell's for that signal (128 + its number: 130 for Ctrl-C, 143 for
    SIGTERM), so that a scheduler sees which of the two it was."""

    signal: int = signal.SIGINT

    @property
    def exit_code(self) -> int:
        return 128 + int(self.signal)


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[Stopped]:
    """SIGTERM taken as Ctrl-C for the block (a KeyboardInterrupt in the main thread): what
    Kubernetes, Slurm and job arrays send to stop a job, which then stops as it does on
    Ctrl-C (what it finished kept, its lock let go) instead of dying at once. (Only the main
    thread may set a handler: a command invoked from another keeps the one it has.)"""
    stopped = Stopped()
    if threading.current_thread() is not threading.main_thread():
        yield stopped
        return

    def interrupt(signum: int, frame: Any) -> None:
        stopped.signal = signum
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield stopped
    finally:
        signal.signal(signal.SIGTERM, previous)


def emit(output: Any, fmt: str, deadline: float | None = None) -> None:
    """Print a command's :class:`~tcbreplay._cli.render.Output` in format ``fmt`` (a table
    still being drawn at ``deadline``, in ``time.monotonic()`` seconds, is stopped)."""
    from tcbreplay._cli.render import emit as emit_output

    emit_output(output, fmt, deadline=deadline)
