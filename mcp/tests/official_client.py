"""Drives portcullis's MCP server with the official MCP Python SDK's client.

    python official_client.py http  '{"url": ..., "tokens": {"support": ..., "finance": ...}}'
    python official_client.py stdio '{"command": ..., "store": ...}'
    python official_client.py http-2026 '{"urls": [..., ...], "pids": [...], "tokens": ...}'
    python official_client.py stdio-2026 '{"command": ..., "store": ...}'
    python official_client.py http[-2026] '{"scenario": "relay", "url": ..., "run": [...], ...}'
    python official_client.py http-2026 '{"scenario": "tasks", "url": ..., "lifetime_ms": ..., ...}'

`http` and `stdio` speak 2025-11-25 (sessions, the initialize handshake); the `-2026` ones the
stateless protocol of 2026-07-28, over HTTP with every request going to the next of several
server processes in turn, as behind a load balancer.

Prints, as its last line, one JSON object: what the client saw. The Rust test
(official_client.rs) asserts on it, and on the SDK's warnings, which go to stderr; this
script only reports.
"""

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import sys

import httpx2
from mcp import Client, ClientSession
from mcp import types
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)

TRANSPORT, _, PROTOCOL = sys.argv[1].partition("-")
SETTINGS = json.loads(sys.argv[2])
TASK = "dev.portcullis/task"
CALL = "dev.portcullis/call"
CONTINUABLE = "dev.portcullis/continuable"
USER_MESSAGE = "dev.portcullis/user_message"
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


class RoundRobin(httpx2.AsyncBaseTransport):
    """Sends each request to the next server in turn, as a load balancer would."""

    def __init__(self, urls):
        self.ports = itertools.cycle([httpx2.URL(url).port for url in urls])
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request):
        request.url = request.url.copy_with(port=next(self.ports))
        return await self.inner.handle_async_request(request)

    async def aclose(self):
        await self.inner.aclose()


def http_client(identity, balanced=True):
    headers = {"Authorization": f"Bearer {SETTINGS['tokens'][identity]}"}
    if PROTOCOL and balanced:
        return httpx2.AsyncClient(headers=headers, timeout=60, transport=RoundRobin(SETTINGS["urls"]))
    return httpx2.AsyncClient(headers=headers, timeout=60)


class Threaded:
    """A 2026-07-28 client that asks for a continuable task and sends back the task handle each
    result gives it, as the specification's explicit state handles go: its calls share one task
    (and its budget)."""

    def __init__(self, client):
        self.client = client
        self.handle = None

    def meta(self):
        return {TASK: self.handle} if self.handle else {CONTINUABLE: True}

    def keep(self, result):
        self.handle = handle_of(result) or self.handle
        return result

    async def call_tool(self, name, arguments, meta=None, **options):
        meta = {**(self.meta() or {}), **(meta or {})} or None
        return self.keep(await self.client.call_tool(name, arguments, meta=meta, **options))

    async def list_tools(self):
        return self.keep(await self.client.list_tools(meta=self.meta()))


def handle_of(result):
    """The task handle a 2026-07-28 result hands back, if any."""
    meta = result.meta or {}
    if not isinstance(meta, dict):
        meta = meta.model_dump(by_alias=True)
    return meta.get(TASK)


@contextlib.asynccontextmanager
async def session(identity, action=None, url=None, delay=0):
    """A connected client as `identity` ("support" or "finance"), whose user answers a
    confirmation with `action` after `delay` seconds, and what it learnt of the server."""
    elicitation = confirmer(action, delay) if action else None
    async with contextlib.AsyncExitStack() as stack:
        if TRANSPORT == "http":
            http = await stack.enter_async_context(http_client(identity, balanced=url is None))
            transport = streamable_http_client(url or SETTINGS.get("url") or SETTINGS["urls"][0], http_client=http)
        else:
            transport = stdio_client(stdio_server(identity))
        if PROTOCOL:
            client = await stack.enter_async_context(
                Client(transport, elicitation_callback=elicitation, message_handler=notified)
            )
            yield Threaded(client), {
                "server": client.server_info.name if client.server_info else None,
                "protocol": client.protocol_version,
                "list_changed": client.server_capabilities.tools.list_changed,
            }
            return
        streams = await stack.enter_async_context(transport)
        client = await stack.enter_async_context(
            ClientSession(*streams, elicitation_callback=elicitation, message_handler=notified)
        )
        init = await client.initialize()
        yield client, {
            "server": init.server_info.name,
            "protocol": init.protocol_version,
            "list_changed": init.capabilities.tools.list_changed,
        }


def stdio_server(identity):
    return StdioServerParameters(
        command=SETTINGS["command"],
        env={
            "PORTCULLIS_MCP_STDIO_STORE": SETTINGS["store"],
            "PORTCULLIS_MCP_CALLER": identity,
        },
    )


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


async def call(client, name, arguments, meta=None):
    try:
        return view(await client.call_tool(name, arguments, meta=meta))
    except MCPError as error:
        return {"protocol_error": error.error.code, "message": error.error.message, "data": error.error.data}


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
    async with session("support", "accept") as (client, learnt):
        seen["initialize"] = learnt
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


async def stateless(seen):
    """What only the stateless protocol has: the task handle, the confirmation's sealed
    requestState, cache hints, and MCP tasks that outlive the instance that opened them."""
    async with session("support", "accept") as (support, _):
        # Asked to confirm, the client retries with its yes and the state, but other arguments.
        first = await support.client.session.call_tool(
            "cancel_order", {"order_id": 11}, meta=support.meta(), allow_input_required=True
        )
        seen["input_required"] = {"type": type(first).__name__, "keys": sorted(first.input_requests or {})}
        try:
            await support.client.session.call_tool(
                "cancel_order",
                {"order_id": 12},
                input_responses={"confirm": {"action": "accept"}},
                request_state=first.request_state,
                meta=support.meta(),
                allow_input_required=True,
            )
            seen["altered"] = "accepted"
        except MCPError as error:
            seen["altered"] = {"code": error.error.code, "data": error.error.data}
        # Sent again with the handle the first answer gave: asked again, under the same ticket.
        support.keep(first)
        again = await support.client.session.call_tool(
            "cancel_order", {"order_id": 11}, meta=support.meta(), allow_input_required=True
        )
        seen["asked_again"] = type(again).__name__
        listed = await support.list_tools()
        dumped = listed.model_dump(by_alias=True)
        seen["cache"] = {"ttlMs": dumped.get("ttlMs"), "cacheScope": dumped.get("cacheScope")}
        seen["handle"] = support.handle is not None
        async with session("finance") as (finance, _):
            await finance.list_tools()
            try:
                await support.client.list_tools(meta={TASK: finance.handle})
                seen["foreign_handle"] = "served"
            except MCPError as error:
                seen["foreign_handle"] = {"code": error.error.code, "data": error.error.data}

    # A task opened on the first instance, which is then killed: the second answers for it.
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
    }

    async def request(http, url, method, params, name=None):
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": method,
            **({"Mcp-Name": name} if name else {}),
        }
        message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
        return sse_message(await http.post(url, headers=headers, json=message))

    first, second = SETTINGS["urls"]
    async with http_client("support", balanced=False) as http:
        duplicate = DUPLICATE.replace('"params": {', '"params": {"_meta": ' + json.dumps(meta) + ", ", 1)
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": "tools/call",
            "Mcp-Name": "update_shipping_address",
        }
        seen["duplicate"] = (await http.post(first, headers=headers, content=duplicate.encode())).json()
    async with http_client("finance", balanced=False) as http:
        payout = {**PAYOUT, "seller_id": "sel_77"}
        created = await request(http, first, "tools/call", {"name": "schedule_payout", "arguments": payout}, "schedule_payout")
        seen["task_created"] = created
        os.kill(SETTINGS["pids"][0], signal.SIGKILL)
        task_id = created.get("result", {}).get("taskId")
        done = {}
        for _ in range(300):
            done = await request(http, second, "tasks/get", {"taskId": task_id}, task_id)
            if done.get("result", {}).get("status") != "working":
                break
            await asyncio.sleep(0.1)
        seen["task_done"] = done
    async with http_client("support", balanced=False) as http:
        seen["task_foreign"] = await request(http, second, "tasks/get", {"taskId": task_id}, task_id)


async def relay(seen):
    """A host that relays its user's messages: it plays the agent's run (each call with the
    message the user wrote before it), retries a call, and sends what it may not."""
    page = {"url": "https://example.com/offer"}
    async with session("host", url=SETTINGS["url"]) as (host, _):
        seen["run"] = [
            await call(host, step["tool"], step["arguments"], {USER_MESSAGE: step["say"]} if "say" in step else None)
            for step in SETTINGS["run"]
        ]
        # The same request twice, as after a lost answer: its call id is honoured under 2026-07-28.
        again = {USER_MESSAGE: SETTINGS["retried"], CALL: "pay-de89"}
        pay = {"recipient": "DE89370400440532013000", "amount_cents": 200}
        seen["retry"] = [await call(host, "send_money", pay, again) for _ in range(2)]
        seen["invalid"] = [
            await call(host, "fetch_page", page, {USER_MESSAGE: words}) for words in (7, "x" * 70_000)
        ]
    async with session("agent", url=SETTINGS["url"]) as (agent, _):
        seen["unmarked"] = await call(agent, "fetch_page", page, {USER_MESSAGE: "Read example.com/offer"})
    async with session("host", url=SETTINGS["broken_url"]) as (host, _):
        seen["unrecorded"] = await call(host, "fetch_page", page, {USER_MESSAGE: "Read example.com/offer"})


async def tasks(seen):
    """Stateless tasks: a request without a handle is a task of its own; a continuable one is
    asked for, and bound by its per-task budget, its lifetime and its caller's cap; the
    per-actor rate limit binds both."""

    async def track(client, meta):
        try:
            result = await client.call_tool("track_parcel", {"parcel": 7}, meta=meta)
        except MCPError as error:
            return {"verdict": (error.error.data or {}).get("code"), "handle": None}
        outcome = view(result)
        verdict = outcome["text"]["error"] if outcome["is_error"] else "completed"
        return {"verdict": verdict, "handle": handle_of(result)}

    url = SETTINGS["url"]
    async with session("ann", url=url) as (ann, _):
        first = await track(ann.client, {CONTINUABLE: True})
        again = [await track(ann.client, {TASK: first["handle"]}) for _ in range(2)]
        seen["continuable"] = [step["verdict"] for step in [first, *again]]
        one_request = [await track(ann.client, None) for _ in range(3)]
        seen["one_request"] = [step["verdict"] for step in one_request]
        seen["one_request_handles"] = [step["handle"] for step in one_request]
        flood = []
        while len(flood) < 10 and (not flood or flood[-1] == "completed"):
            flood.append((await track(ann.client, None))["verdict"])
        seen["flood"] = flood
        seen["continuable_flooded"] = (await track(ann.client, {CONTINUABLE: True}))["verdict"]
    async with session("bob", url=url) as (bob, _):
        started = await track(bob.client, {CONTINUABLE: True})
        await asyncio.sleep(SETTINGS["lifetime_ms"] / 1000 + 0.3)
        seen["expired"] = (await track(bob.client, {TASK: started["handle"]}))["verdict"]
    async with session("carl", url=url) as (carl, _):
        started = [await track(carl.client, {CONTINUABLE: True}) for _ in range(SETTINGS["cap"] + 1)]
        seen["oldest"] = (await track(carl.client, {TASK: started[0]["handle"]}))["verdict"]
        seen["newest"] = (await track(carl.client, {TASK: started[-1]["handle"]}))["verdict"]


async def shop(seen):
    """The shop, at the transport and protocol asked."""
    await common(seen)
    if TRANSPORT == "http" and PROTOCOL:
        await resumed(seen)
        await stateless(seen)
    elif TRANSPORT == "http":
        await raw_http(seen)
        await raw_tasks(seen)
        await resumed(seen)
    elif not PROTOCOL:
        await raw_stdio(seen)


async def main():
    seen = {}
    if SETTINGS.get("scenario") == "relay":
        await relay(seen)
    elif SETTINGS.get("scenario") == "tasks":
        await tasks(seen)
    else:
        await shop(seen)
    print(json.dumps(seen, default=str))


asyncio.run(main())
