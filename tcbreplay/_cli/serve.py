"""``tcbreplay serve``: answer OpenAI and Anthropic requests over HTTP with a run's recorded
turns."""

from __future__ import annotations

import shlex
import signal
from typing import Any

import click

from tcbreplay._cli.common import STORE_OPTION, complete_run_id, main
from tcbreplay._cli.params import listen_on
from tcbreplay._words import count


@main.command()
@click.argument("run_id", shell_complete=complete_run_id)
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on (loopback only unless given).")  # fmt: skip
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The port to listen on (0: a free one).")  # fmt: skip
@click.option(
    "--log-run",
    metavar="NEW",
    help="Log what was served and every divergence as run NEW (a replay run).",
)
@click.option("--verbose", is_flag=True, help="Print a line per request on stderr.")
@STORE_OPTION
def serve(run_id, host, port, log_run, verbose, store) -> None:
    """Serve RUN_ID's recorded turns as OpenAI Chat Completions (POST /v1/chat/completions)
    and Responses (POST /v1/responses), Anthropic Messages (POST /v1/messages) and Gemini
    generateContent (POST /v1beta/models/MODEL:generateContent), streamed or not, until
    Ctrl-C.

    Each request is answered with the recorded turn whose request fingerprint matches; one
    that matches none gets HTTP 409, naming the nearest recorded request and where it
    first differs. Point an SDK's base URL at it: OpenAI's at http://HOST:PORT/v1,
    Anthropic's and Gemini's at http://HOST:PORT."""
    from tcbreplay._replay.serve import serve_run
    from tcbreplay._store.runs import Store

    warning = listen_on(host)
    server = serve_run(Store(store), run_id, host=host, port=port, log_run=log_run,
                       verbose=verbose)  # fmt: skip
    recording = server.service.recording
    # SIGTERM stops as Ctrl-C does, and either folds the log, as soon as the address is out
    previous = signal.signal(signal.SIGTERM, lambda *_: server.stop())
    try:
        click.echo(
            f"serving {run_id} ("
            f"{count(len(recording.samples), 'sample and trial', 'samples and trials')}, "
            f"{count(recording.turn_count(), 'turn')}) at {server.url}",
            err=True,
        )
        click.echo(f"  OpenAI:    base_url={server.url}/v1", err=True)
        click.echo(f"  Anthropic: base_url={server.url}", err=True)
        click.echo(f"  Gemini:    base_url={server.url} (POST /v1beta/models/MODEL:"
                   "generateContent, :streamGenerateContent?alt=sse)", err=True)  # fmt: skip
        if warning:
            click.echo(warning, err=True)
        if recording.turn_count() == 0:
            click.echo(_no_turns(Store(store), run_id), err=True)
        if log_run:
            click.echo(f"  logging to run {log_run}", err=True)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        summary = server.close()
    service = server.service
    line = f"served {count(service.served, 'request')}, {service.diverged} diverged"
    if summary is not None:
        line += f"; logged {summary.recorded} conversations to run {summary.run_id}"
    click.echo(line, err=True)


def _no_turns(store: Any, run_id: str) -> str:
    """The warning a run with no recorded answer is served with (a replay whose samples all
    diverged at their first request, a log that logged nothing): every request gets a 409,
    and its parent, where it has one, holds the recording."""
    run = store.open_run(run_id)
    replay = run.manifest.get("replay") or {}
    parent = replay.get("parent_run_id") if isinstance(replay, dict) else None
    where = (
        f"; its parent holds the recording: tcbreplay serve {shlex.quote(parent)}"
        f"{run.store_option()}"
        if isinstance(parent, str)
        else ""
    )
    return (
        f"Warning: run {run_id} holds no recorded model answer, so every request gets 409" + where
    )
