// Drives portcullis's MCP server with the official MCP TypeScript SDK's client
// (@modelcontextprotocol/sdk, pinned in package-lock.json), over streamable HTTP at 2025-11-25:
//
//     node client.mjs '{"url": ..., "tokens": {"support": ..., "finance": ...}}'
//
// Prints, as its last line, one JSON object: what the client saw, with every line the SDK (or
// anything it runs, such as ajv) wrote to the console. The Rust test (mcp/tests/ts_client.rs)
// asserts on it, and on the process's stderr; this script only reports.

import { format } from "node:util";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";

// Whatever is written to the console is a warning to the test: ajv, for one, reports an
// unknown `format` with console.warn. Kept here, and reported.
const WARNINGS = [];
for (const level of ["debug", "error", "info", "log", "trace", "warn"]) {
  console[level] = (...words) => WARNINGS.push(`console.${level}: ${format(...words)}`);
}
process.on("warning", (warning) => WARNINGS.push(`process: ${warning.name}: ${warning.message}`));

const SETTINGS = JSON.parse(process.argv[2]);
const ASKED = [];

const ADDRESS = { street: "1 Main St", city: "Berlin", country: "DE" };
const PAYOUT = { seller_id: "sel_42", amount: { cents: 5000, currency: "EUR" }, timing: { when: "now" } };
// A key named twice: JavaScript's objects cannot hold it, so the request is written as text.
const DUPLICATE =
  '{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "update_shipping_address",' +
  ' "arguments": {"order_id": 1, "order_id": 2, "address": {"street": "1 Main St", "city": "Berlin",' +
  ' "country": "DE"}}}}';
const READING = { count: 4294967296, offset: -7, ratio: 0.5 };

function headers(identity) {
  return { Authorization: `Bearer ${SETTINGS.tokens[identity]}` };
}

// A connected client as `identity`, whose user answers a confirmation with `action`; runs
// `body` with it, then ends the session as a host does (DELETE) and closes.
async function session(identity, action, body) {
  const transport = new StreamableHTTPClientTransport(new URL(SETTINGS.url), {
    requestInit: { headers: headers(identity) },
  });
  const capabilities = action ? { elicitation: { form: {} } } : {};
  const client = new Client({ name: "portcullis-ts-client-test", version: "1.0.0" }, { capabilities });
  if (action) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      ASKED.push(request.params.message);
      return { action };
    });
  }
  await client.connect(transport);
  try {
    return await body(client, transport);
  } finally {
    await transport.terminateSession();
    await client.close();
  }
}

function view(result) {
  const text = result.content?.[0]?.text;
  let body = text;
  try {
    body = JSON.parse(text);
  } catch {
    // Plain text.
  }
  return { is_error: result.isError ?? false, text: body, structured: result.structuredContent ?? null };
}

async function call(client, name, args) {
  try {
    return view(await client.callTool({ name, arguments: args }));
  } catch (error) {
    if (error instanceof McpError) {
      return { protocol_error: error.code, message: error.message, data: error.data ?? null };
    }
    throw error;
  }
}

// Lists the tools, as a host does, and compiles each input schema with the SDK's own validator,
// as a host that checks a model's arguments before it sends them does (the client itself
// compiles the output schemas). Returns the tools.
async function listed(client) {
  const { tools } = await client.listTools();
  const validator = new AjvJsonSchemaValidator();
  for (const tool of tools) {
    validator.getValidator(tool.inputSchema);
  }
  return tools;
}

const names = (tools) => tools.map((tool) => tool.name).sort();

// The JSON-RPC message of a streamable HTTP response: JSON, or the data of an SSE event.
async function message(response) {
  const text = await response.text();
  if ((response.headers.get("content-type") ?? "").startsWith("application/json")) {
    return JSON.parse(text);
  }
  for (const line of text.split("\n")) {
    if (line.startsWith("data:") && line.slice(5).trim()) {
      return JSON.parse(line.slice(5));
    }
  }
  return { status: response.status, body: text };
}

async function main() {
  const seen = {};
  await session("support", "accept", async (client, transport) => {
    seen.initialize = {
      server: client.getServerVersion()?.name ?? null,
      protocol: transport.protocolVersion ?? null,
      list_changed: client.getServerCapabilities()?.tools?.listChanged ?? null,
    };
    const tools = await listed(client);
    seen.tools_support = names(tools);
    const measure = tools.find((tool) => tool.name === "measure");
    seen.measure_schemas = { input: measure?.inputSchema ?? null, output: measure?.outputSchema ?? null };
    seen.search = await call(client, "search_products", { query: "lamp" });
    seen.measure = await call(client, "measure", READING);
    seen.decode = await call(client, "search_products", { query: "lamp", colour: "red" });
    seen.validate = await call(client, "search_products", { query: "lamp", max_results: 99 });
    seen.authorize = await call(client, "update_shipping_address", {
      order_id: 3,
      address: { ...ADDRESS, country: "KP" },
    });
    seen.hidden_tool = await call(client, "refund_payment", {
      payment_id: "pay_12345",
      amount_cents: 100,
      reason: "duplicate",
    });
    seen.unknown_tool = await call(client, "drop_database", {});
    seen.confirmed = await call(client, "cancel_order", { order_id: 7 });
    // The raw request, in this session.
    const response = await fetch(SETTINGS.url, {
      method: "POST",
      headers: {
        ...headers("support"),
        Accept: "application/json, text/event-stream",
        "Content-Type": "application/json",
        "Mcp-Session-Id": transport.sessionId,
        "Mcp-Protocol-Version": transport.protocolVersion,
      },
      body: DUPLICATE,
    });
    seen.duplicate = await message(response);
  });
  await session("support", "decline", async (client) => {
    await listed(client);
    seen.approve = await call(client, "cancel_order", { order_id: 8 });
  });
  seen.asked = [...ASKED];
  await session("finance", null, async (client) => {
    seen.tools_finance = names(await listed(client));
    // Waits until the test, as the operator, approves it in the store.
    seen.payout = await call(client, "schedule_payout", PAYOUT);
    seen.budget = await call(client, "schedule_payout", { ...PAYOUT, seller_id: "sel_43" });
  });
  seen.warnings = WARNINGS.splice(0);
  // The control: a schema with a Rust integer's format, compiled by the SDK's validator, is
  // warned of, and the warning is caught here. (Were it not, an empty list above proves nothing.)
  new AjvJsonSchemaValidator().getValidator({
    type: "object",
    properties: { count: { type: "integer", format: "uint64" } },
  });
  seen.control = WARNINGS.splice(0);
  process.stdout.write(`${JSON.stringify(seen)}\n`);
}

await main();
