"""A user's own agent (``--agent MODULE:FACTORY``): a LangGraph graph built from a chat
model, the run's tools and its system prompt, recorded and replayed like the built-in one.

The factory is a callable that the runner calls once per recording process, with keywords::

    def make_agent(model: BaseChatModel, tools: list[BaseTool], system_prompt: str):
        return graph  # a compiled LangGraph graph (or any runnable like it)

``model`` is the run's chat model (the one ``--model`` names; a recorded run's in a
replay): bind the tools to it (``model.bind_tools(tools)``) and call it from the graph.
``tools`` are the run's tools as LangChain tools, ``system_prompt`` the run's prompt (``""``
when it has none). The graph takes ``{"messages": [{"role": "user", "content": ...}]}``
and keeps the conversation under ``"messages"`` in its state; the runner streams it (its
``astream`` with ``stream_mode="values"``) and stores the messages of the last state.

``model`` keeps to the recording's call policy as the built-in agent's model calls do (see
:mod:`tcbreplay._record.policed_model`): transient failures retried, ``--max-rpm``,
``--max-tpm`` and ``--call-timeout`` kept, a refused key stopping the run. A model the graph
makes itself does not: it is said once.
"""

from __future__ import annotations

import hashlib
import importlib
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tcbreplay._record.agent import CallPolicy
from tcbreplay._record.call_tools import tool_names
from tcbreplay._store.schema import FORMAT_KEPT, SYSTEM_KEPT
from tcbreplay.errors import InputError, TcbReplayWarning

AgentFactory = Callable[..., Any]

# the manifest's record of the factory of a run recorded with --agent
AGENT_FIELD = "agent"


def load_agent_factory(source: str) -> tuple[AgentFactory, dict[str, Any]]:
    """The factory ``module:attr`` names (modules of the working directory included), and
    what a run's manifest records of it: ``{"factory": source, "sha256": of its module}``."""
    module_name, sep, attr = source.partition(":")
    if not sep or not module_name or not attr:
        raise InputError(f"--agent {source!r}: expected MODULE:FACTORY (my_agents:build)")
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise InputError(f"--agent {source}: cannot import module {module_name!r}: {exc}") from exc
    except (Exception, SystemExit) as exc:  # the user's module raised while importing
        raise InputError(
            f"--agent {source}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    factory: Any = module
    for part in attr.split("."):
        factory = getattr(factory, part, None)
        if factory is None:
            raise InputError(f"--agent {source}: module {module_name!r} has no {attr!r}")
    if not callable(factory):
        raise InputError(f"--agent {source}: {attr} is {type(factory).__name__}, not callable")
    path = getattr(module, "__file__", None)
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None
    # (its runs keep the system messages their requests began with, SYSTEM_KEPT, and the
    # answer formats its calls asked for, FORMAT_KEPT)
    return factory, {"factory": source, "sha256": digest, SYSTEM_KEPT: True, FORMAT_KEPT: True}


def build_custom_agent(
    factory: AgentFactory,
    source: str,
    model: Any,
    tools: list[Any],
    system_prompt: str,
    policy: CallPolicy | None = None,
) -> Any:
    """The graph ``factory`` builds (see the module) with ``model`` under ``policy`` (its
    retries, rate limits and call timeout); a factory that fails, or returns what cannot be
    streamed, is an error naming it."""
    from tcbreplay._record.policed_model import under_policy

    policed = under_policy(model, policy or CallPolicy(), source)
    try:
        graph = factory(model=policed, tools=list(tools), system_prompt=system_prompt)
    except Exception as exc:
        raise InputError(
            f"--agent {source}: the factory failed: {type(exc).__name__}: {exc}",
            hint="it is called as factory(model=..., tools=[...], system_prompt='...')",
        ) from exc
    if not callable(getattr(graph, "astream", None)) or not hasattr(graph, "with_config"):
        raise InputError(
            f"--agent {source}: the factory returned {type(graph).__name__}, not a graph",
            hint="return a compiled LangGraph graph (StateGraph(...).compile(), create_agent)",
        )
    # its model calls answered are counted as the built-in agent's middleware counts them
    # (a first wave of samples failing after answers is no unreachable provider), and the
    # system messages its requests began with are kept where they are not the prompt
    # (and the tools each call was sent, where they are not those it was given)
    watcher = _call_watcher(system_prompt, source, tool_names(list(tools)))
    return graph.with_config(callbacks=[watcher])


def _call_watcher(system_prompt: str, source: str, names: list[str]) -> Any:
    """A callback handler keeping, in a sample's state (the context of the task that runs
    it, :data:`tcbreplay._record.agent.current_sample`), how many of its model calls were
    answered, the system messages each answered call's request began with, the answer
    format it asked for and the tools it was sent where they are not ``names`` (the run's):
    a graph of one's own may send the prompt it was given, another, or none, bind a schema
    to a call, or other tools, and its stored messages do not say (replay compares its
    requests with those). A call of a model the graph made
    itself, which keeps to none of the recording's settings, is said once."""
    from langchain_core.callbacks import BaseCallbackHandler

    from tcbreplay._record.agent import current_sample
    from tcbreplay._record.call_tools import sent_tools
    from tcbreplay._record.formats import asked_format
    from tcbreplay._record.policed_model import attempt_under_way, outside_policy

    class Watcher(BaseCallbackHandler):
        run_inline = True  # (a count and a list: no thread for them)

        def __init__(self) -> None:
            self.sent: dict[Any, list[Any]] = {}  # a call under way -> its system contents
            self.formats: dict[Any, Any] = {}  # a call under way -> the format it asks for
            self.tools: dict[Any, Any] = {}  # a call under way -> its tools, if not the run's
            self.warned = False

        def on_chat_model_start(
            self, serialized: Any, messages: list[list[Any]], *, run_id: Any, **kwargs: Any
        ) -> None:
            if not self.warned and outside_policy():
                self.warned = True
                name = ((serialized or {}).get("id") or ["a chat model"])[-1]
                warnings.warn(
                    TcbReplayWarning(
                        f"--agent {source}: its graph calls a model it was not given "
                        f"({name}): --retries, --max-rpm, --max-tpm and --call-timeout do "
                        "not apply to its calls (build the graph with the model it is given)"
                    ),
                    stacklevel=2,
                )
            leading = []
            for message in messages[0] if messages else ():
                if getattr(message, "type", None) != "system":
                    break
                leading.append(message.content)
            self.sent[run_id] = leading
            # (the call's keywords are among its invocation parameters: a schema that
            # with_structured_output binds, or one given to the call)
            params = kwargs.get("invocation_params") or {}
            self.formats[run_id] = asked_format(params)
            self.tools[run_id] = sent_tools(params, names)

        def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
            call = (self.sent.pop(run_id, []), self.formats.pop(run_id, None),
                    self.tools.pop(run_id, None))  # fmt: skip
            state = current_sample.get(None)
            if state is None:
                return
            state.prompt = system_prompt
            attempt = attempt_under_way()
            if attempt is not None:
                # a policed model's: its reply is an answer once the policy takes it (an
                # empty reply retried, one cut off at the token limit, one past
                # --call-timeout are none), see tcbreplay._record.policed_model.Attempt
                attempt.replied = call
            else:
                state.call_answered(call)

        def on_llm_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
            if run_id not in self.sent:  # (no chat model's call)
                return
            sent = self.sent.pop(run_id)
            asked = self.formats.pop(run_id, None)
            tools = self.tools.pop(run_id, None)
            state = current_sample.get(None)
            if state is not None:
                # the call a sample that ends in error failed at, unless one is answered after
                # it: kept as an answered call's is (SampleState.keep_failed_call)
                state.prompt = system_prompt
                state.failed_call = (sent, asked, tools)

    return Watcher()
