"""What a recording runs each sample with: the chat model, the tools as code to run, the
system prompt, the built-in agent or a user's own (``--agent``), and the function that runs
one trial of a sample.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tcbreplay._inputs.benchmarks import BenchmarkInputs
from tcbreplay._record.agent import CallPolicy, build_agent
from tcbreplay._record.agent_factory import AgentFactory, build_custom_agent
from tcbreplay._record.failures import Outcome
from tcbreplay.errors import InputError

# runs one trial of a sample: (agent, sample, run_id, options, trial, sample_index) ->
# (journal record, outcome); run_sample, or a replay's
SampleRunner = Callable[..., Awaitable[tuple[dict[str, Any], Outcome]]]


@dataclass
class AgentPlan:
    """What a recording runs each sample with: the chat model, the tools and system prompt
    the agent is built with (``factory``: a user's own agent, see
    :mod:`tcbreplay._record.agent_factory`; None: the built-in one), the function that runs
    one trial of a sample, and ``finish``: the manifest fields that the stored rows give,
    written when the recording ends (``finish(rows, manifest)``)."""

    chat_model: Any
    tools: list[Any]
    system_prompt: str
    factory: tuple[AgentFactory, str] | None = None  # the factory and its MODULE:FACTORY
    run_one: SampleRunner | None = None  # None: run_sample
    finish: Callable[[list[dict[str, Any]], dict[str, Any]], dict[str, Any]] | None = None
    middleware: tuple[Any, ...] = ()  # the built-in agent's, after the recording's

    def agent(self, policy: CallPolicy) -> Any:
        """The agent of one process (``policy``: its model calls', kept by the built-in
        agent's middleware or by the model a factory is given)."""
        if self.factory is not None:
            factory, source = self.factory
            return build_custom_agent(
                factory, source, self.chat_model, self.tools, self.system_prompt, policy
            )
        return build_agent(self.chat_model, self.tools, self.system_prompt, policy, self.middleware)


def runnable_tools(inputs: BenchmarkInputs) -> list[Any]:
    """The inputs' tools as code to run, refused where there is none to run."""
    tools = inputs.toolset.tools
    if tools is None:
        raise InputError(
            f"{inputs.toolset.source}: JSON tool schemas have no code to run",
            hint="record needs tools from a Python module:attr; JSON schemas suit import",
        )
    own = next((s for s in inputs.dataset.samples if s.tools is not None), None)
    if own is not None:
        place = own.where or f"entry {own.index}"
        raise InputError(
            f"{Path(inputs.dataset.source).name}: {place}: has tools of its own, which have no "
            "code to run",
            hint="record runs the tools of --tools for every sample; a dataset whose entries "
            "carry their own tools suits import",
        )
    return tools
