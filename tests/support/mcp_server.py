#!/usr/bin/env python3
"""A small MCP server over stdio for tests: JSON-RPC messages one per line.

Tools: `echo` (its `text` back), `add` (structured content), `slow` (waits `seconds`, or
until cancelled), `crash` (the process exits mid-call), `big` (`bytes` of text), `fail`
(an error result), `change` (adds a tool `late` and says the list changed). The list comes
in two pages. Flags: `--hang` (never answers the handshake), `--garbage` (answers it with a
line that is not JSON), `--log FILE` (appends every message received, for the test to read),
`--child FILE` (starts a process of its own that ignores stdin, and writes its pid there).
Prompts: `greet` (`name` required, `mood` optional: a user message and an assistant one),
`review` (none); resources: `memo://one` and `memo://two`.
"""

import json
import os
import sys
import threading
import time

ARGS = sys.argv[1:]
LOG = ARGS[ARGS.index("--log") + 1] if "--log" in ARGS else None
cancelled = set()
lock = threading.Lock()
extra_tools = []


def send(message):
    with lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def tool(name, description, properties, required=()):
    return {
        "name": name,
        "description": description,
        "inputSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": properties,
            "required": list(required),
        },
    }


TOOLS = [
    tool("echo", "Says the text back.", {"text": {"type": "string"}}, ["text"]),
    tool("add", "Adds two numbers.", {"a": {"type": "number"}, "b": {"type": "number"}}),
    tool("slow", "Waits.", {"seconds": {"type": "number"}}),
    tool("crash", "Exits in the middle of the call.", {}),
    tool("big", "A long text.", {"bytes": {"type": "integer"}}),
    tool("fail", "Always fails.", {}),
    tool("change", "Adds a tool.", {}),
    tool("picture", "A small picture.", {}),
]

# The eight bytes that open every PNG file.
PNG = "iVBORw0KGgo="



def text_result(text, error=False):
    return {"content": [{"type": "text", "text": text}], "isError": error}


def call(request_id, name, args):
    if name == "picture":
        return {"content": [
            {"type": "text", "text": "a picture:"},
            {"type": "image", "mimeType": "image/png", "data": PNG},
        ]}
    if name == "echo":
        return text_result(args.get("text", ""))
    if name == "add":
        total = args.get("a", 0) + args.get("b", 0)
        return {"content": [{"type": "text", "text": str(total)}], "structuredContent": {"sum": total}}
    if name == "slow":
        end = time.time() + float(args.get("seconds", 30))
        while time.time() < end:
            if request_id in cancelled:
                return None
            time.sleep(0.01)
        return text_result("done waiting")
    if name == "crash":
        sys.stderr.write("fake server: crashing as asked\n")
        sys.stderr.flush()
        os._exit(3)
    if name == "big":
        size = int(args.get("bytes", 100000))
        line = "0123456789" * 9 + "\n"
        return text_result((line * (size // len(line) + 1))[:size])
    if name == "fail":
        return text_result("it went wrong", error=True)
    if name == "change":
        if not extra_tools:
            extra_tools.append(tool("late", "Came later.", {}))
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed", "params": {}})
        return text_result("added")
    if name == "late":
        return text_result("late tool ran")
    return None


def handle(message):
    method = message.get("method")
    request_id = message.get("id")
    params = message.get("params") or {}
    if method == "initialize":
        if "--hang" in ARGS:
            return
        if "--garbage" in ARGS:
            with lock:
                sys.stdout.write("this is not json\n")
                sys.stdout.flush()
            return
        send({
            "jsonrpc": "2.0",
            "id": request_id,
            "result": {
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {"listChanged": True}, "prompts": {}, "resources": {}},
                "serverInfo": {"name": "fake", "version": "1.0"},
            },
        })
    elif method == "notifications/cancelled":
        cancelled.add(params.get("requestId"))
    elif method == "tools/list":
        tools = TOOLS + extra_tools
        half = len(tools) // 2
        if params.get("cursor") == "page2":
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools[half:]}})
        else:
            send({"jsonrpc": "2.0", "id": request_id, "result": {"tools": tools[:half], "nextCursor": "page2"}})
    elif method == "tools/call":
        def run():
            result = call(request_id, params.get("name"), params.get("arguments") or {})
            if result is not None:
                send({"jsonrpc": "2.0", "id": request_id, "result": result})
            if "--quit-after-call" in ARGS:
                os._exit(0)
        threading.Thread(target=run, daemon=True).start()
    elif method == "prompts/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"prompts": [
            {"name": "greet", "description": "Greets someone.", "arguments": [
                {"name": "name", "required": True}, {"name": "mood"}]},
            {"name": "review", "description": "Asks for a review."},
        ]}})
    elif method == "prompts/get":
        args = params.get("arguments") or {}
        if params.get("name") == "greet":
            text = "Say hello to %s, %s." % (args.get("name", "?"), args.get("mood") or "plainly")
            messages = [
                {"role": "user", "content": {"type": "text", "text": text}},
                {"role": "assistant", "content": {"type": "text", "text": "Gladly."}},
            ]
        else:
            messages = [{"role": "user", "content": {"type": "resource", "resource": {
                "uri": "memo://one", "mimeType": "text/plain", "text": "Review the memo."}}}]
        send({"jsonrpc": "2.0", "id": request_id, "result": {"messages": messages}})
    elif method == "resources/list":
        send({"jsonrpc": "2.0", "id": request_id, "result": {"resources": [
            {"uri": "memo://one", "name": "one"}, {"uri": "memo://two", "name": "two"}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": request_id, "result": {}})
    elif request_id is not None:
        send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "no such method"}})


def main():
    if "--child" in ARGS:
        import subprocess
        child = subprocess.Popen(["sleep", "120"], stdin=subprocess.DEVNULL)
        with open(ARGS[ARGS.index("--child") + 1], "w") as out:
            out.write(str(child.pid))
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        if LOG:
            with open(LOG, "a") as log:
                log.write(line + "\n")
        handle(json.loads(line))


if __name__ == "__main__":
    main()
