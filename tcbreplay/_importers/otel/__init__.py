"""OpenTelemetry spans as traces: one span reader shared by the span dialects (``otlp``,
``jaeger``), one module per convention family (GenAI, OpenInference, the Vercel AI SDK)
reading model calls and tool runs out of spans, the samples built from them, the ``collect``
receiver and the OTLP writer of ``export``.

The dialects are the containers (an OTLP export request, a Jaeger trace file), not the
conventions: one trace often mixes conventions (OpenInference's LangChain spans around an
``openai-v2`` chat span), so every span is read by whichever convention it is written in.
"""
