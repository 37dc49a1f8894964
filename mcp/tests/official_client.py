"""Drives portcullis's MCP server with the official MCP Python SDK's client.

    python official_client.py http  '{"url": ..., "tokens": {"support": ..., "finance": ...}}'
    python official_client.py stdio '{"command": ..., "store": ...}'

Prints, as its last line, one JSON object: what the client saw. The Rust test
(official_client.rs) asserts on it, and on the SDK's warnings, which go to stderr; this
script only reports.
"""

import asyncio
import contextlib
import json
import logging
import sys

import httpx2
from mcp import ClientSession
from mcp import types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

TRANSPORT = sys.argv[1]
SETTINGS = json.loads(sys.argv[2])
ASKED = []
NOTIFICATIONS = []


async def notified(message):
    method = getattr(message, "method", None)
    if isinstance(method, str) and method.endswith("list_changed"):
        NOTIFICATIONS.append(method)


def confirmer(action, delay=0):
    async def answer(context, params):
        ASKED.append(params.message)
        await asyncio.sleep(delay)
        return types.ElicitResult(action=action)

    return answer


@contextlib.asynccontextmanager
async def session(identity, action=None, url=None, delay=0):
    """An initialized session as `identity` ("support" or "finance"), whose user answers a
    confirmation with `action` after `delay` seconds."""
    elicitation = confirmer(action, delay) if action else None
    if TRANSPORT == "http":
        token = SETTINGS["tokens"][identity]
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with streamable_http_client(url or SETTINGS["url"], http_client=http) as streams:
                async with ClientSession(*streams, elicitation_callback=elicitation, message_handler=notified) as client:
                    yield client, await client.initialize()
    else:
        server = StdioServerParameters(
            command=SETTINGS["command"],
            env={
                "PORTCULLIS_MCP_STDIO_STORE": SETTINGS["store"],
                "PORTCULLIS_MCP_CALLER": identity,
            },
        )
        async with stdio_client(server) as streams:
            async with ClientSession(*streams, elicitation_callback=elicitation, message_handler=notified) as client:
                yield client, await client.initialize()


def view(result):
    text = result.content[0].text if result.content else None
    try:
        body = json.loads(text)
    except (TypeError, ValueError):
        body = text
    return {
        "is_error": result.is_error,
        "text": body,
        "structured": result.structured_content,
    }


async def call(client, name, arguments):
    try:
        return view(await client.call_tool(name, arguments))
    except MCPError as error:
        return {"protocol_error": error.error.code, "message": error.error.message}


async def tool_names(client):
    return sorted(tool.name for tool in (await client.list_tools()).tools)


ADDRESS = {"street": "1 Main St", "city": "Berlin", "country": "DE"}
DUPLICATE = (
    '{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "update_shipping_address",'
    ' "arguments": {"order_id": 1, "order_id": 2, "address": {"street": "1 Main St", "city": "Berlin",'
    ' "country": "DE"}}}}'
)
PAYOUT = {"seller_id": "sel_42", "amount": {"cents": 5000, "currency": "EUR"}, "timing": {"when": "now"}}


async def common(seen):
    async with session("support", "accept") as (client, init):
        seen["initialize"] = {
            "server": init.server_info.name,
            "protocol": init.protocol_version,
            "list_changed": init.capabilities.tools.list_changed,
        }
        seen["tools_support"] = await tool_names(client)
        seen["search"] = await call(client, "search_products", {"query": "lamp"})
        seen["decode"] = await call(client, "search_products", {"query": "lamp", "colour": "red"})
        seen["validate"] = await call(client, "search_products", {"query": "lamp", "max_results": 99})
        seen["authorize"] = await call(
            client,
            "update_shipping_address",
            {"order_id": 3, "address": {**ADDRESS, "country": "KP"}},
        )
        seen["hidden_tool"] = await call(
            client, "refund_payment", {"payment_id": "pay_12345", "amount_cents": 100, "reason": "duplicate"}
        )
        seen["unknown_tool"] = await call(client, "drop_database", {})
        seen["confirmed"] = await call(client, "cancel_order", {"order_id": 7})
    async with session("support", "decline") as (client, _):
        seen["approve"] = await call(client, "cancel_order", {"order_id": 8})
    seen["asked"] = list(ASKED)
    # Decided in the store (as from the command line) while the user is still being asked: the
    # user's later yes finds the call decided, and the answer is that decision's run.
    async with session("support", "accept", delay=2.0) as (client, _):
        seen["decided_first"] = await call(client, "cancel_order", {"order_id": 9})
    async with session("finance") as (client, _):
        seen["tools_finance"] = await tool_names(client)
        # Waits until the test, as the operator, approves it in the store.
        seen["payout"] = await call(client, "schedule_payout", PAYOUT)
        seen["budget"] = await call(client, "schedule_payout", {**PAYOUT, "seller_id": "sel_43"})
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        seen["colours_after"] = tools["paint_sample"].input_schema["properties"]["colour"]["enum"]
    seen["notifications"] = NOTIFICATIONS
    # Two sessions make the same requests, so their calls carry the same JSON-RPC id.
    same_id = {}
    for name, order in [("a", 1), ("b", 2)]:
        async with session("support") as (client, _):
            same_id[name] = await call(client, "update_shipping_address", {"order_id": order, "address": ADDRESS})
    seen["same_id"] = same_id


def sse_message(response):
    """The JSON-RPC message of a streamable HTTP response (JSON or one SSE event)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return response.json()
    for line in response.text.splitlines():
        if line.startswith("data:") and line[5:].strip():
            return json.loads(line[5:])
    return {"status": response.status_code, "body": response.json()}


async def raw_http(seen):
    url = SETTINGS["url"]
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    support = {**accept, "Authorization": f"Bearer {SETTINGS['tokens']['support']}"}
    finance = {**accept, "Authorization": f"Bearer {SETTINGS['tokens']['finance']}"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    async with httpx2.AsyncClient(timeout=30) as http:
        response = await http.post(url, headers=accept, json=initialize)
        seen["unauthenticated"] = response.status_code
        response = await http.post(url, headers=support, json=initialize)
        session_id = response.headers["mcp-session-id"]
        in_session = {**support, "Mcp-Session-Id": session_id, "Mcp-Protocol-Version": "2025-11-25"}
        await http.post(url, headers=in_session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        hijack = {**finance, "Mcp-Session-Id": session_id, "Mcp-Protocol-Version": "2025-11-25"}
        response = await http.post(url, headers=hijack, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        seen["hijack"] = sse_message(response)
        response = await http.post(url, headers=in_session, content=b'{"jsonrpc": "2.0", "id": 3, "method": ')
        seen["malformed"] = (
            {"status": response.status_code, "body": response.json()}
            if response.status_code >= 400
            else sse_message(response)
        )
        response = await http.post(url, headers=in_session, json={"jsonrpc": "2.0", "id": 4, "method": "tools/list"})
        seen["after_malformed"] = sse_message(response)
        response = await http.post(url, headers=in_session, content=DUPLICATE.encode())
        seen["duplicate"] = response.json()


async def raw_tasks(seen):
    """A client that declares MCP tasks (the SDK's client does not: raw JSON-RPC here)."""
    url = SETTINGS["url"]
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

    async def open_session(http, identity):
        headers = {**accept, "Authorization": f"Bearer {SETTINGS['tokens'][identity]}"}
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
                "clientInfo": {"name": "tasks", "version": "1"},
            },
        }
        response = await http.post(url, headers=headers, json=initialize)
        headers = {**headers, "Mcp-Session-Id": response.headers["mcp-session-id"], "Mcp-Protocol-Version": "2025-11-25"}
        await http.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        return headers

    async def request(http, headers, id, method, params):
        message = {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
        return sse_message(await http.post(url, headers=headers, json=message))

    async with httpx2.AsyncClient(timeout=30) as http:
        finance = await open_session(http, "finance")
        created = await request(http, finance, 2, "tools/call", {"name": "schedule_payout", "arguments": {**PAYOUT, "seller_id": "sel_77"}})
        seen["task_created"] = created
        task_id = created.get("result", {}).get("taskId")
        done = {}
        for attempt in range(300):
            done = await request(http, finance, 10 + attempt, "tasks/get", {"taskId": task_id})
            if done.get("result", {}).get("status") != "working":
                break
            await asyncio.sleep(0.1)
        seen["task_done"] = done
        seen["task_cancel"] = await request(http, finance, 5, "tasks/cancel", {"taskId": task_id})
        other = await open_session(http, "finance")
        seen["task_foreign"] = await request(http, other, 2, "tasks/get", {"taskId": task_id})


async def resumed(seen):
    """The wait ends before the operator decides; the same call again learns the outcome."""
    late = {**PAYOUT, "seller_id": "sel_late"}
    async with session("finance", url=SETTINGS["impatient_url"]) as (client, _):
        seen["late_first"] = await call(client, "schedule_payout", late)
        await asyncio.sleep(2.5)
        seen["late_again"] = await call(client, "schedule_payout", late)


async def raw_stdio(seen):
    process = await asyncio.create_subprocess_exec(
        SETTINGS["command"],
        env={"PORTCULLIS_MCP_STDIO_STORE": SETTINGS["store"], "PORTCULLIS_MCP_CALLER": "support"},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    }
    lines = [
        json.dumps(initialize),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        '{"jsonrpc": "2.0", "id": 2, "method": ',
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
        DUPLICATE,
    ]
    process.stdin.write(("\n".join(lines) + "\n").encode())
    await process.stdin.drain()
    answers = {}
    while len(answers) < 4:
        line = await asyncio.wait_for(process.stdout.readline(), 10)
        if not line:
            break
        message = json.loads(line)
        answers[json.dumps(message.get("id"))] = message
    process.stdin.close()
    await process.wait()
    seen["malformed"] = answers.get("null") or answers.get("2") or {}
    seen["after_malformed"] = answers.get("3", {})
    seen["duplicate"] = answers.get("5", {})


async def main():
    seen = {}
    await common(seen)
    if TRANSPORT == "http":
        await raw_http(seen)
        await raw_tasks(seen)
        await resumed(seen)
    else:
        await raw_stdio(seen)
    print(json.dumps(seen, default=str))


asyncio.run(main())
