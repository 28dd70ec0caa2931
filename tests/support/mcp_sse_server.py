#!/usr/bin/env python3
"""A small MCP server over the HTTP+SSE transport of the 2024-11-05 revision, for tests.

GET /sse opens the event stream; its first event, `endpoint`, names /messages?session=1,
where the client POSTs its messages (answered 202); answers come as `message` events on the
stream. Tools: `echo` (its `text` back). Prints the port it listens on, then serves until
killed. `--foreign` names an endpoint on another origin instead (the client must refuse it).
"""

import json
import queue
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

outbox = queue.Queue()
FOREIGN = "--foreign" in sys.argv[1:]


def answer(message):
    method = message.get("method")
    request_id = message.get("id")
    if method == "initialize":
        result = {
            "protocolVersion": "2024-11-05",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "sse-fake", "version": "1.0"},
        }
    elif method == "tools/list":
        result = {"tools": [{
            "name": "echo",
            "description": "Says the text back.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }]}
    elif method == "tools/call":
        text = (message.get("params") or {}).get("arguments", {}).get("text", "")
        result = {"content": [{"type": "text", "text": "sse: " + text}]}
    elif method == "ping":
        result = {}
    elif request_id is None:
        return
    else:
        outbox.put({"jsonrpc": "2.0", "id": request_id,
                    "error": {"code": -32601, "message": "no such method"}})
        return
    outbox.put({"jsonrpc": "2.0", "id": request_id, "result": result})


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path != "/sse":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        endpoint = "http://elsewhere.invalid/messages" if FOREIGN else "/messages?session=1"
        self.wfile.write(("event: endpoint\ndata: %s\n\n" % endpoint).encode())
        self.wfile.flush()
        while True:
            message = outbox.get()
            self.wfile.write(("event: message\ndata: %s\n\n" % json.dumps(message)).encode())
            self.wfile.flush()

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if not self.path.startswith("/messages"):
            self.send_error(404)
            return
        self.send_response(202)
        self.send_header("Content-Length", "0")
        self.end_headers()
        answer(json.loads(body))


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
