"""Tools in a replay: run live (and compared with what they answered when recorded, see
:mod:`tcbreplay._replay.outputs`), or served from the recording (``--recorded-tools``).

With recorded outputs, each call is answered with the output the recording holds for a
call of that tool with equal arguments, as a multiset within the sample: never by order,
so a model that makes two calls of one tool in the other order gets each its own output. A
call the recording does not hold runs live, when the tool has code. The built-in agent also
answers a call of a tool it does not have with its recorded output (a graph of one's own
answers it as its tool node does).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from tcbreplay._replay.state import current_replay


class RecordedOutputTool(BaseTool):
    """A tool that answers with the recorded output of an equal call while a sample is
    replayed with recorded outputs (see the module), else runs ``inner``."""

    inner: BaseTool

    @classmethod
    def wrap(cls, tool: BaseTool) -> RecordedOutputTool:
        return cls(
            name=tool.name,
            description=tool.description,
            args_schema=tool.args_schema,
            inner=tool,
            metadata=tool.metadata,
        )

    def _run(self, *args: Any, **kwargs: Any) -> Any:  # not called: invoke is overridden
        raise NotImplementedError

    def invoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        served = self._served(input)
        return served if served is not None else self.inner.invoke(input, config, **kwargs)

    async def ainvoke(self, input: Any, config: Any = None, **kwargs: Any) -> Any:
        served = self._served(input)
        if served is not None:
            return served
        return await self.inner.ainvoke(input, config, **kwargs)

    def _served(self, input: Any) -> ToolMessage | None:
        if not isinstance(input, Mapping) or input.get("type") != "tool_call":
            return None
        return recorded_output(input)


def recorded_output(call: Mapping[str, Any]) -> ToolMessage | None:
    """The recorded output of an equal call (a LangChain tool call) of the sample being
    replayed, taken from its pool; None when it holds none, or no sample is replayed."""
    state = current_replay.get(None)
    if state is None:
        return None
    name = str(call.get("name") or "")
    found = state.take_tool_output(name, call.get("args"))
    if found is None:
        return None
    call_id = str(call.get("id") or "")
    state.tool_served(call_id)
    return ToolMessage(
        content=found.content if found.content is not None else "",
        tool_call_id=call_id,
        name=name,
        status="error" if found.status == "error" else "success",
    )


def unknown_tools_middleware() -> Any:
    """The built-in agent's middleware that answers a call of a tool it does not have with
    the recorded output of an equal call (its tool node answers such calls itself, before
    any tool runs)."""
    from langchain.agents.middleware import AgentMiddleware

    class RecordedOutputs(AgentMiddleware):
        async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
            if request.tool is None:
                served = recorded_output(request.tool_call)
                if served is not None:
                    return served
            return await handler(request)

    return RecordedOutputs()


def stub_tools(schemas: Sequence[Mapping[str, Any]]) -> list[BaseTool]:
    """LangChain tools of JSON schemas that have no code: bound to the model as the schemas
    say, and answering every call they are asked to run with an error (a run imported with
    JSON tools replays with ``--recorded-tools``)."""
    out: list[BaseTool] = []
    for schema in schemas:
        name = str(schema.get("name"))

        def fail(_name: str = name, **_: Any) -> Any:
            raise ToolException(f"tool {_name!r} has no code to run (JSON schema only)")

        async def afail(_name: str = name, **_: Any) -> Any:
            raise ToolException(f"tool {_name!r} has no code to run (JSON schema only)")

        out.append(
            StructuredTool(
                name=name,
                description=str(schema.get("description") or ""),
                args_schema=dict(schema.get("parameters") or {"type": "object", "properties": {}}),
                func=fail,
                coroutine=afail,
                handle_tool_error=True,
            )
        )
    return out
