// The shop agent on the Vercel AI SDK (generateText with tools, several steps), its
// telemetry sent by OpenTelemetry's OTLP/HTTP JSON exporter. Run by make_vercel.py:
//   node agent.mjs OPENAI_BASE_URL OTLP_ENDPOINT
import { createOpenAI } from "@ai-sdk/openai";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { NodeTracerProvider } from "@opentelemetry/sdk-trace-node";
import { generateText, stepCountIs, tool } from "ai";
import { z } from "zod";

const [baseURL, endpoint] = process.argv.slice(2);
const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ "service.name": "shop-agent-ai-sdk" }),
  spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({ url: `${endpoint}/v1/traces` }))],
});
provider.register(); // the context manager that makes a step's spans children of its call
const tracer = provider.getTracer("shop-agent");
const openai = createOpenAI({ baseURL, apiKey: "sk-test-not-a-key" });

const CATALOG = [
  { item_id: 1, name: "Notebook", price: 2.5 },
  { item_id: 2, name: "Pen", price: 1.2 },
  { item_id: 3, name: "Backpack", price: 25.0 },
  { item_id: 4, name: "Bottle", price: 8.0 },
  { item_id: 5, name: "Headphones", price: 45.0 },
];
const pair = z.object({ a: z.number(), b: z.number() });
const tools = {
  list_items: tool({
    description: "List every item in the shop's catalog with its item_id, name and unit price in dollars.",
    inputSchema: z.object({}),
    execute: async () => ({ items: CATALOG }),
  }),
  add_numbers: tool({
    description: "Add two numbers and return their sum. Pass the larger of the two numbers as a.",
    inputSchema: pair,
    execute: async ({ a, b }) => ({ result: a + b }),
  }),
  multiply_numbers: tool({
    description: "Multiply two numbers and return their product. Pass the larger of the two numbers as a.",
    inputSchema: pair,
    execute: async ({ a, b }) => ({ result: a * b }),
  }),
};

for (const prompt of ["Multiply 7 by 8 for me.", "One backpack, one bottle and one pen: how much is that altogether?"]) {
  await generateText({
    model: openai.chat("gpt-4o-mini"),
    system: "You are the shop's assistant.",
    prompt,
    tools,
    stopWhen: stepCountIs(6),
    experimental_telemetry: { isEnabled: true, tracer, functionId: "shop" },
  });
}
await provider.shutdown();
