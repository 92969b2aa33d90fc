"""Make ``semconv_examples.otlp.jsonl``: the OpenTelemetry GenAI semantic conventions' own
published examples as spans, made with the real SDK and written by OpenTelemetry's JSON file
exporter.

The attribute values are those of ``docs/gen-ai/non-normative/examples-llm-calls.md`` in
open-telemetry/semantic-conventions-genai (Apache-2.0), copied as published: "Simple chat
completion" (content on span attributes) as one trace, and "Tool calls (functions)" (content
on span attributes: chat span 1, the execute_tool span, chat span 2) as another, under an
``invoke_agent`` span the example leaves to the application. The published example's tool
definition is named ``get_current_weather`` while its calls name ``get_weather``; both are
kept as published.

Run from the repository's root: ``.venv/bin/python tests/data/otel/make_semconv.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent
OUT = HERE / "semconv_examples.otlp.jsonl"

SIMPLE_INPUT = [
    {"role": "system", "parts": [{"type": "text", "content": "You are a helpful bot"}]},
    {"role": "user", "parts": [{"type": "text", "content": "Tell me a joke about OpenTelemetry"}]},
]
SIMPLE_OUTPUT = [
    {
        "role": "assistant",
        "parts": [
            {
                "type": "text",
                "content": " Why did the developer bring OpenTelemetry to the party? Because it "
                "always knows how to trace the fun!",
            }
        ],
    }
]
CALL = {
    "type": "tool_call",
    "id": "call_VSPygqKTWdrhaFErNvMV18Yl",
    "name": "get_weather",
    "arguments": {"location": "Paris"},
}
TOOL_INPUT_1 = [{"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}]
TOOL_OUTPUT_1 = [{"role": "assistant", "parts": [CALL]}]
DEFINITIONS = [
    {
        "type": "function",
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The city and state, e.g. San Francisco, CA",
                },
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["location", "unit"],
        },
    }
]
TOOL_INPUT_2 = [
    *TOOL_INPUT_1,
    {"role": "assistant", "parts": [CALL]},
    {
        "role": "tool",
        "parts": [
            {
                "type": "tool_call_response",
                "id": "call_VSPygqKTWdrhaFErNvMV18Yl",
                "response": "rainy, 57°F",
            }
        ],
    },
]
TOOL_OUTPUT_2 = [
    {
        "role": "assistant",
        "parts": [
            {
                "type": "text",
                "content": "The weather in Paris is currently rainy with a temperature of 57°F.",
            }
        ],
    }
]


def chat(tracer, attributes: dict) -> None:
    with tracer.start_as_current_span("chat gpt-4") as span:
        base = {
            "gen_ai.provider.name": "openai",
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4",
            "gen_ai.request.max_tokens": 200,
            "gen_ai.request.top_p": 1.0,
            "gen_ai.response.model": "gpt-4-0613",
        }
        for key, value in {**base, **attributes}.items():
            span.set_attribute(key, json.dumps(value) if isinstance(value, list) else value)


def main() -> None:
    from opentelemetry.exporter.otlp.json.file.trace_exporter import FileSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    OUT.unlink(missing_ok=True)
    provider = TracerProvider(resource=Resource.create({"service.name": "semconv-examples"}))
    provider.add_span_processor(SimpleSpanProcessor(FileSpanExporter(OUT)))
    tracer = provider.get_tracer("examples-llm-calls")
    chat(
        tracer,
        {
            "gen_ai.response.id": "chatcmpl-9J3uIL87gldCFtiIbyaOvTeYBRA3l",
            "gen_ai.usage.input_tokens": 52,
            "gen_ai.usage.output_tokens": 47,
            "gen_ai.response.finish_reasons": ("stop",),
            "gen_ai.input.messages": SIMPLE_INPUT,
            "gen_ai.output.messages": SIMPLE_OUTPUT,
        },
    )
    with tracer.start_as_current_span("invoke_agent weather") as agent:
        agent.set_attribute("gen_ai.operation.name", "invoke_agent")
        chat(
            tracer,
            {
                "gen_ai.response.id": "chatcmpl-9J3uIL87gldCFtiIbyaOvTeYBRA3l",
                "gen_ai.usage.input_tokens": 47,
                "gen_ai.usage.output_tokens": 17,
                "gen_ai.response.finish_reasons": ("tool_calls",),
                "gen_ai.input.messages": TOOL_INPUT_1,
                "gen_ai.output.messages": TOOL_OUTPUT_1,
                "gen_ai.tool.definitions": DEFINITIONS,
            },
        )
        with tracer.start_as_current_span("execute_tool get_weather") as tool:
            tool.set_attribute("gen_ai.tool.call.id", "call_VSPygqKTWdrhaFErNvMV18Yl")
            tool.set_attribute("gen_ai.tool.name", "get_weather")
            tool.set_attribute("gen_ai.operation.name", "execute_tool")
            tool.set_attribute("gen_ai.tool.type", "function")
        chat(
            tracer,
            {
                "gen_ai.response.id": "chatcmpl-call_VSPygqKTWdrhaFErNvMV18Yl",
                "gen_ai.usage.input_tokens": 97,
                "gen_ai.usage.output_tokens": 52,
                "gen_ai.response.finish_reasons": ("stop",),
                "gen_ai.input.messages": TOOL_INPUT_2,
                "gen_ai.output.messages": TOOL_OUTPUT_2,
            },
        )
    provider.shutdown()
    print("wrote", OUT.name)


if __name__ == "__main__":
    main()
