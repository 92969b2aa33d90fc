"""Tools and agents the replay tests change: a tool that drifts, one whose output changes
only in form, one whose schema changes, and a LangGraph graph of one's own."""

from __future__ import annotations

from pydantic import BaseModel

from tcbreplay._inputs.benchmarks.tool_call.tools import add_numbers, list_items, multiply_numbers


def add_numbers_drifted(a: float, b: float) -> dict:
    """Add two numbers and return their sum. Pass the larger of the two numbers as a."""
    return {"result": a + b + 1}


add_numbers_drifted.__name__ = "add_numbers"


def multiply_numbers_cosmetic(a: float, b: float) -> dict:
    """Multiply two numbers and return their product. Pass the larger of the two numbers as a."""
    product = a * b
    return {"result": int(product) if float(product).is_integer() else product}


multiply_numbers_cosmetic.__name__ = "multiply_numbers"


def add_numbers_int(a: float, b: int) -> dict:
    """Add two numbers and return their sum. Pass the larger of the two numbers as a."""
    return {"result": a + b}


add_numbers_int.__name__ = "add_numbers"

DRIFTED = [list_items, add_numbers_drifted, multiply_numbers]
COSMETIC = [list_items, add_numbers, multiply_numbers_cosmetic]
SCHEMA = [list_items, add_numbers_int, multiply_numbers]


def react_graph(model, tools, system_prompt, answer=None):
    """A ReAct loop as a LangGraph graph of one's own: a model node, a tool node.
    ``answer(bound, messages)``: how the model node asks the bound model (by default, with
    the messages only)."""
    from langchain_core.messages import SystemMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    bound = model.bind_tools(tools)

    async def ask(bound, messages):
        return await bound.ainvoke(messages)

    async def call_model(state: MessagesState) -> dict:
        prompt = [SystemMessage(system_prompt)] if system_prompt else []
        return {"messages": [await (answer or ask)(bound, prompt + state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


def failing_factory(model, tools, system_prompt):
    """An --agent factory that fails when it is called."""
    raise ValueError("boom")


def asks_twice_then_stops(model, tools, system_prompt):
    """An --agent that asks for its first turn twice, then stops (runs no tool it is asked to
    call, asks for no turn after)."""
    from langchain_core.messages import SystemMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    bound = model.bind_tools(tools)

    async def call_model(state: MessagesState) -> dict:
        prompt = [SystemMessage(system_prompt)] if system_prompt else []
        await bound.ainvoke(prompt + state["messages"])
        return {"messages": [await bound.ainvoke(prompt + state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_edge(START, "model")
    graph.add_edge("model", END)
    return graph.compile()


def forbids_tools(model, tools, system_prompt):
    """:func:`react_graph`, its model bound with ``tool_choice="none"``."""
    return react_graph(_Bound(model, tool_choice="none"), tools, system_prompt)


class _Bound:
    """A model whose ``bind_tools`` binds these settings too."""

    def __init__(self, model, **settings):
        self.model, self.settings = model, settings

    def bind_tools(self, tools, **kwargs):
        return self.model.bind_tools(tools, **{**self.settings, **kwargs})


def crash_on_answers(model, tools, system_prompt):
    """:func:`react_graph` whose model node raises on the model's final answer (its calls
    run as usual): every sample ends in the agent's own error, after answered model calls."""

    async def answer(bound, messages):
        made = await bound.ainvoke(messages)
        if not made.tool_calls:
            raise ValueError("the agent's own failure")
        return made

    return react_graph(model, tools, system_prompt, answer)


def forbids_tools_per_call(model, tools, system_prompt):
    """:func:`react_graph` whose model is asked with ``tool_choice="none"`` at each call
    (``ainvoke``'s keywords), not bound with it."""

    async def answer(bound, messages):
        return await bound.ainvoke(messages, tool_choice="none")

    return react_graph(model, tools, system_prompt, answer)


def requires_a_call(model, tools, system_prompt):
    """:func:`react_graph`, its model bound with ``tool_choice="required"``: it never ends on
    its own (it stops at the graph's recursion limit, in error)."""
    return react_graph(_Bound(model, tool_choice="required"), tools, system_prompt)


def drops_prompt(model, tools, system_prompt):
    """:func:`react_graph` that sends no system message, whatever prompt it is given."""
    return react_graph(model, tools, "")


def own_prompt(model, tools, system_prompt):
    """:func:`react_graph` that sends a system message of its own instead of the prompt."""
    return react_graph(model, tools, "You are a careful calculator.")


def prompt_per_turn(model, tools, system_prompt):
    """:func:`react_graph` whose system message says how many messages the conversation
    holds: another at each turn."""
    from langchain_core.messages import SystemMessage

    async def answer(bound, messages):
        rest = [m for m in messages if m.type != "system"]
        told = [SystemMessage(f"{system_prompt} ({len(rest)} messages so far)")]
        return await bound.ainvoke(told + rest)

    return react_graph(model, tools, system_prompt, answer)


def streams_its_model(model, tools, system_prompt):
    """:func:`react_graph` whose model node streams the model (``astream``) and answers with
    the chunks put together, as a graph showing its tokens as they come does."""
    from langchain_core.messages import message_chunk_to_message

    async def answer(bound, messages):
        whole = None
        async for chunk in bound.astream(messages):
            whole = chunk if whole is None else whole + chunk
        return message_chunk_to_message(whole)

    return react_graph(model, tools, system_prompt, answer)


def streams_its_model_sync(model, tools, system_prompt):
    """:func:`sync_graph` whose model node streams the model (``stream``)."""
    from langchain_core.messages import message_chunk_to_message

    def answer(bound, messages):
        whole = None
        for chunk in bound.stream(messages):
            whole = chunk if whole is None else whole + chunk
        return message_chunk_to_message(whole)

    return sync_graph(model, tools, system_prompt, answer)


def sync_graph(model, tools, system_prompt, answer=None):
    """:func:`react_graph` whose model node is a plain function calling the model with
    ``invoke`` (LangGraph runs it in a thread), as LangGraph's own examples write it.
    ``answer(bound, messages)``: how the node asks the bound model (by default, ``invoke``)."""
    from langchain_core.messages import SystemMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    bound = model.bind_tools(tools)

    def call_model(state: MessagesState) -> dict:
        prompt = [SystemMessage(system_prompt)] if system_prompt else []
        ask = answer or (lambda bound, messages: bound.invoke(messages))
        return {"messages": [ask(bound, prompt + state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


def own_model(model, tools, system_prompt):
    """:func:`react_graph` over a model of its own (a copy of the sim it is given, made anew),
    not the one it is given."""
    from tcbreplay._record.models.sim import SimChatModel

    return react_graph(SimChatModel.from_settings(model.settings, model.samples), tools,
                       system_prompt)  # fmt: skip


def plain_list_graph(model, tools, system_prompt):
    """A graph whose state keeps ``messages: list`` without LangGraph's ``add_messages``
    reducer: the conversation stays as it was given, the user's message a dict."""
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        messages: list

    bound = model.bind_tools(tools)

    async def call(state: State) -> dict:
        return {"messages": state["messages"] + [await bound.ainvoke(state["messages"])]}

    graph = StateGraph(State)
    graph.add_node("call", call)
    graph.add_edge(START, "call")
    graph.add_edge("call", END)
    return graph.compile()


class _Streams:
    """A runnable like a graph, whose stream ``values`` gives (or ``raising`` raises)."""

    def __init__(self, values=(), raising=None):
        self.values, self.raising = values, raising

    def with_config(self, **kwargs):
        return self

    async def astream(self, input, config=None, stream_mode=None):
        for value in self.values:
            yield value
        if self.raising is not None:
            raise self.raising


def none_messages(model, tools, system_prompt):
    """A graph whose state has ``messages`` None."""
    return _Streams([{"messages": None}])


def yields_nothing(model, tools, system_prompt):
    """A graph whose stream ends without a state."""
    return _Streams([])


def no_messages(model, tools, system_prompt):
    """A graph whose last state has ``messages`` empty."""
    return _Streams([{"messages": []}])


def raises_cancelled(model, tools, system_prompt):
    """A graph that raises ``CancelledError`` of its own (no one cancelled it)."""
    import asyncio

    return _Streams(raising=asyncio.CancelledError())


def exits(model, tools, system_prompt):
    """A graph that calls ``sys.exit(5)``."""
    return _Streams(raising=SystemExit(5))


# the schema the answers of :func:`asks_a_schema` are asked to follow
REPLY_SCHEMA = {
    "type": "object",
    "properties": {"reply": {"type": "string"}},
    "required": ["reply"],
}


def asks_a_schema(model, tools, system_prompt):
    """:func:`react_graph` whose model is asked, at each call, for a JSON answer following
    :data:`REPLY_SCHEMA`, in the keywords ChatGoogleGenerativeAI's ``with_structured_output``
    binds (here beside the tools)."""

    async def answer(bound, messages):
        return await bound.ainvoke(messages, response_mime_type="application/json",
                                   response_json_schema=REPLY_SCHEMA)  # fmt: skip

    return react_graph(model, tools, system_prompt, answer)


def asks_claude_a_schema(model, tools, system_prompt):
    """:func:`react_graph` whose model is asked, at each call, for a JSON answer following
    :data:`REPLY_SCHEMA`, in the ``output_config`` ChatAnthropic's
    ``with_structured_output(method="json_schema")`` binds (here beside the tools)."""
    schema = {"title": "Reply", **REPLY_SCHEMA}  # (a schema's title names it)
    structured = model.with_structured_output(schema, method="json_schema")
    output_config = structured.first.kwargs["output_config"]

    async def answer(bound, messages):
        return await bound.ainvoke(messages, output_config=output_config)

    return react_graph(model, tools, system_prompt, answer)


# the response_format the calls of :func:`asks_a_format` give (OpenAI's, as ChatOpenAI's
# ``with_structured_output`` binds it)
REPLY_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "Reply",
        "strict": True,
        "schema": {**REPLY_SCHEMA, "additionalProperties": False},
    },
}


def asks_a_format(model, tools, system_prompt):
    """:func:`react_graph` whose model is asked, at each call, for an answer of
    :data:`REPLY_FORMAT` (its tools bound strict: ChatOpenAI parses the answer of such a
    call, and takes only strict tools beside it)."""

    async def answer(bound, messages):
        return await bound.ainvoke(messages, response_format=REPLY_FORMAT)

    return react_graph(_Bound(model, strict=True), tools, system_prompt, answer)


def answers_in_a_schema(model, tools, system_prompt):
    """:func:`react_graph` whose final answer is asked again of the bare model, through
    ``with_structured_output`` (OpenAI's JSON schema, :data:`REPLY_FORMAT`'s), as a last step:
    that call is sent no tools, the others the run's."""
    from langchain_core.messages import SystemMessage
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    bound = model.bind_tools(tools)
    schema = {"title": "Reply", **REPLY_FORMAT["json_schema"]["schema"]}
    structured = model.with_structured_output(schema, method="json_schema", strict=True,
                                              include_raw=True)  # fmt: skip
    prompt = [SystemMessage(system_prompt)] if system_prompt else []

    async def call_model(state: MessagesState) -> dict:
        return {"messages": [await bound.ainvoke(prompt + state["messages"])]}

    async def final(state: MessagesState) -> dict:
        return {"messages": [(await structured.ainvoke(prompt + state["messages"]))["raw"]]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_node("final", final)
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: "final"})
    graph.add_edge("tools", "model")
    graph.add_edge("final", END)
    return graph.compile()


def claude_provider_strategy(model, tools, system_prompt, schema=REPLY_SCHEMA):
    """LangChain's ``create_agent`` answering in ``schema`` through ``ProviderStrategy``:
    each call is given it as an OpenAI ``response_format``, which ChatAnthropic sends as
    ``output_config.format`` (the schema rewritten by the anthropic SDK's
    ``transform_schema``)."""
    from langchain.agents import create_agent
    from langchain.agents.structured_output import ProviderStrategy

    schema = {"title": "Reply", **schema}
    return create_agent(model, tools, system_prompt=system_prompt,
                        response_format=ProviderStrategy(schema))  # fmt: skip


class Note(BaseModel):
    """A reply to the user, and its mood if it has one."""

    reply: str
    mood: str | None = None


def claude_given_a_model_class(model, tools, system_prompt):
    """:func:`react_graph` whose model is given, at each call, the pydantic model :class:`Note`
    as its ``response_format``: ChatAnthropic sends its JSON schema as
    ``output_config.format``, rewritten by the anthropic SDK's ``transform_schema`` (``mood``
    optional, its default said in its description), where the openai SDK sends another (every
    field required, no default)."""

    async def answer(bound, messages):
        return await bound.ainvoke(messages, response_format=Note)

    return react_graph(model, tools, system_prompt, answer)


def structured_graph(schema):
    """A factory of a graph that asks its model once, through
    ``with_structured_output(schema, method="json_schema")`` (the answer parsed, not the
    model's message), and keeps what was parsed as its answer (JSON; a pydantic model's
    fields)."""

    def factory(model, tools, system_prompt):
        import json

        from langchain_core.messages import AIMessage, SystemMessage
        from langgraph.graph import END, START, MessagesState, StateGraph

        structured = model.with_structured_output(schema, method="json_schema")
        prompt = [SystemMessage(system_prompt)] if system_prompt else []

        async def answer(state: MessagesState) -> dict:
            parsed = await structured.ainvoke(prompt + state["messages"])
            fields = parsed if isinstance(parsed, dict) else parsed.model_dump()
            return {"messages": [AIMessage(json.dumps(fields))]}

        graph = StateGraph(MessagesState)
        graph.add_node("answer", answer)
        graph.add_edge(START, "answer")
        graph.add_edge("answer", END)
        return graph.compile()

    return factory


# an agent asking for answers of REPLY_SCHEMA, and one asking for a number as the reply
answers_structured = structured_graph({"title": "Reply", **REPLY_SCHEMA})
answers_a_number = structured_graph(
    {"title": "Reply", **REPLY_SCHEMA, "properties": {"reply": {"type": "integer"}}}
)


class Reply(BaseModel):
    """A reply to the user."""

    reply: str


class NumberReply(BaseModel):
    """A reply to the user."""

    reply: int


NumberReply.__name__ = NumberReply.__qualname__ = "Reply"  # (the same name, another field)

# as answers_structured and answers_a_number, the schema a pydantic model
answers_in_a_model = structured_graph(Reply)
answers_a_number_model = structured_graph(NumberReply)


def agent_with_response_format(schema):
    """A factory of LangChain's ``create_agent`` given ``schema`` as its ``response_format``
    (its AutoStrategy: the provider's answer format where the model's profile says it has
    one, else the schema as a tool)."""

    def factory(model, tools, system_prompt):
        from langchain.agents import create_agent

        return create_agent(model, tools, system_prompt=system_prompt, response_format=schema)

    return factory


responds_in_a_model = agent_with_response_format(Reply)
responds_in_a_schema = agent_with_response_format({"title": "Reply", **REPLY_SCHEMA})


def responds_by_provider_strategy(model, tools, system_prompt):
    """``create_agent`` asking for a :class:`Reply` in the provider's answer format, whatever
    the model's profile says (``ProviderStrategy``)."""
    from langchain.agents import create_agent
    from langchain.agents.structured_output import ProviderStrategy

    return create_agent(
        model, tools, system_prompt=system_prompt, response_format=ProviderStrategy(Reply)
    )
