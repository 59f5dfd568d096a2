#!/usr/bin/env python3
"""fake_llm_server.py -- a scripted OpenAI / Anthropic streaming server for ditto's tests.

Usage: fake_llm_server.py TRANSCRIPT.json LOG.jsonl

Listens on 127.0.0.1 on an ephemeral port and prints that port alone on the
first line of stdout. POST .../chat/completions speaks OpenAI Chat
Completions, POST .../messages speaks Anthropic Messages, both streamed as
SSE with chunked transfer encoding.

TRANSCRIPT is a JSON list of responses served in order, one per request,
whichever API asked. Each response is an object:

  "text":       a string (streamed as one piece per word) or a list of pieces
  "usage":      {"input": n, "output": n}
  "finish":     finish / stop reason (default "stop" / "end_turn")
  "fault":      one of
                  "rate_limit"   429, retry-after (see "retry_after", default 1)
                  "server_error" 500
                  "bad_gateway"  502 with an HTML body (not JSON)
                  "overloaded"   529 (Anthropic's overloaded_error)
                  "auth"         401 whose message echoes the key it was sent
                  "quota"        OpenAI 429 insufficient_quota /
                                 Anthropic 400 "credit balance is too low"
                  "bad_request"  400
                  "non_json"     200 event stream whose data is not JSON
                  "plain_json"   200 application/json, the whole answer at once
                  "empty"        200 event stream headers, then close
                  "hang"         no answer at all for "stall_s" seconds, then close
  "stall_after":    after this many text pieces stop sending, keep the
                    connection open ("stall_s" seconds, default 30)
  "truncate_after": after this many text pieces send half an event and close
  "error_after":    after this many pieces send an in-stream error event
                    (Anthropic overloaded_error / OpenAI server_error)
  "delay":          seconds to sleep before each piece (slow tokens)
  "split":          write every event in small pieces, flushed apart
  "crlf":           end lines with \\r\\n
  "comments":       send ": keep-alive" comment lines between events

A request past the end of the transcript gets 400 "transcript exhausted".

Every request is appended to LOG as one JSON line: {"n", "path", "headers"
(lower-case names, values as received, the key included so that tests can
check the right one was sent), "body" (parsed JSON, or the raw text)}.
"""

import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn


class Server(ThreadingMixIn, HTTPServer):
    daemon_threads = True  # a stalled response must not keep the process alive
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # a client that hung up mid-stream (cancel, stall) is expected


TRANSCRIPT = []
LOG_PATH = None
LOCK = threading.Lock()
NEXT = [0]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # quiet: the test reads its own log
        pass

    # ---- plumbing ------------------------------------------------------

    def send_json(self, status, obj, headers=None):
        data = json.dumps(obj).encode()
        self.send_raw(status, "application/json", data, headers)

    def send_raw(self, status, ctype, data, headers=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def start_stream(self):
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def chunk(self, data):
        if not data:
            return
        self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
        self.wfile.flush()

    def end_stream(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def cut(self):
        """Close the connection at once, without the last chunk."""
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def event(self, r, name, obj):
        nl = "\r\n" if r.get("crlf") else "\n"
        text = ""
        if r.get("comments"):
            text += ": keep-alive" + nl
        if name:
            text += "event: " + name + nl
        data = obj if isinstance(obj, str) else json.dumps(obj)
        text += "data: " + data + nl + nl
        raw = text.encode()
        if r.get("split"):
            for i in range(0, len(raw), 7):
                self.chunk(raw[i:i + 7])
                time.sleep(0.002)
        else:
            self.chunk(raw)
        return raw

    # ---- a request -----------------------------------------------------

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace")
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw
        with LOCK:
            n = NEXT[0]
            NEXT[0] += 1
            rec = {"n": n, "path": self.path,
                   "headers": {k.lower(): v for k, v in self.headers.items()},
                   "body": body}
            with open(LOG_PATH, "a") as f:
                f.write(json.dumps(rec) + "\n")
        if self.path.endswith("/chat/completions"):
            api = "openai"
        elif self.path.endswith("/messages"):
            api = "anthropic"
        else:
            self.send_json(404, {"error": {"message": "no route " + self.path,
                                           "type": "not_found"}})
            return
        if n >= len(TRANSCRIPT):
            self.send_json(400, {"error": {"message": "fake server: transcript exhausted",
                                           "type": "invalid_request_error"}})
            return
        r = TRANSCRIPT[n]
        key = self.headers.get("x-api-key") or \
            (self.headers.get("Authorization") or "").replace("Bearer ", "", 1)
        if r.get("fault") and self.fault(api, r, key):
            return
        if api == "openai":
            self.openai(r, body if isinstance(body, dict) else {})
        else:
            self.anthropic(r, body if isinstance(body, dict) else {})

    def err(self, api, status, etype, message, headers=None, code=None):
        if api == "anthropic":
            obj = {"type": "error", "error": {"type": etype, "message": message}}
        else:
            obj = {"error": {"message": message, "type": etype, "param": None, "code": code}}
        self.send_json(status, obj, headers)

    def fault(self, api, r, key):
        """Serve a fault response; False when the fault is in the stream."""
        f = r["fault"]
        if f == "rate_limit":
            # OpenAI's text mentions billing: it must not read as a spend limit.
            self.err(api, 429, "rate_limit_error" if api == "anthropic" else "requests",
                     "Rate limit reached for requests per min. Please add a payment method to "
                     "your account to increase your rate limit. Visit "
                     "https://platform.openai.com/account/billing to add a payment method.",
                     {"retry-after": str(r.get("retry_after", 1))}, "rate_limit_exceeded")
        elif f == "server_error":
            self.err(api, 500, "api_error" if api == "anthropic" else "server_error",
                     "The server had an error while processing your request")
        elif f == "bad_gateway":
            self.send_raw(502, "text/html", b"<html><body><h1>502 Bad Gateway</h1></body></html>")
        elif f == "overloaded":
            self.err(api, 529, "overloaded_error", "Overloaded")
        elif f == "auth":
            if api == "anthropic":
                self.err(api, 401, "authentication_error", "invalid x-api-key " + key)
            else:
                self.err(api, 401, "invalid_request_error",
                         "Incorrect API key provided: " + key + ". You can find your API key "
                         "at https://platform.openai.com/account/api-keys.", None,
                         "invalid_api_key")
        elif f == "quota":
            if api == "anthropic":
                self.err(api, 400, "invalid_request_error",
                         "Your credit balance is too low to access the Anthropic API. Please go "
                         "to Plans & Billing to upgrade or purchase credits.")
            else:
                self.err(api, 429, "insufficient_quota",
                         "You exceeded your current quota, please check your plan and billing "
                         "details.", None, "insufficient_quota")
        elif f == "bad_request":
            self.err(api, 400, "invalid_request_error", "max_tokens: must be positive")
        elif f == "non_json":
            self.start_stream()
            self.event(r, None, "<html>this is not json</html>")
            self.end_stream()
        elif f == "plain_json":
            self.plain(api, r)
        elif f == "hang":
            time.sleep(r.get("stall_s", 30))
            self.cut()
        elif f == "empty":
            self.start_stream()
            self.cut()
        else:
            return False
        return True

    def pieces(self, r):
        t = r.get("text", "")
        if isinstance(t, list):
            return t
        words = t.split(" ")
        pieces = [w + " " for w in words[:-1]] + [words[-1]]
        return [p for p in pieces if p]

    def plain(self, api, r):
        text = "".join(self.pieces(r))
        u = r.get("usage", {})
        if api == "anthropic":
            obj = {"id": "msg_fake", "type": "message", "role": "assistant",
                   "content": [{"type": "text", "text": text}],
                   "stop_reason": r.get("finish", "end_turn"),
                   "usage": {"input_tokens": u.get("input", 0),
                             "output_tokens": u.get("output", 0)}}
        else:
            obj = {"id": "chatcmpl-fake", "object": "chat.completion",
                   "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                "finish_reason": r.get("finish", "stop")}],
                   "usage": {"prompt_tokens": u.get("input", 0),
                             "completion_tokens": u.get("output", 0)}}
        self.send_json(200, obj)

    def interrupt(self, r, i, api, events):
        """Apply a stall / truncation / error fault before piece i; True
        when the response is over."""
        if r.get("stall_after") == i:
            time.sleep(r.get("stall_s", 30))
            self.cut()
            return True
        if r.get("truncate_after") == i:
            raw = self.event_bytes(r, *events)
            self.chunk(raw[:len(raw) // 2])
            self.cut()
            return True
        if r.get("error_after") == i:
            if api == "anthropic":
                self.event(r, "error", {"type": "error", "error": {
                    "type": "overloaded_error", "message": "Overloaded"}})
            else:
                self.event(r, None, {"error": {"message": "The server had an error",
                                               "type": "server_error"}})
            self.end_stream()
            return True
        return False

    def event_bytes(self, r, name, obj):
        nl = "\r\n" if r.get("crlf") else "\n"
        text = ("event: " + name + nl) if name else ""
        return (text + "data: " + json.dumps(obj) + nl + nl).encode()

    def openai(self, r, body):
        model = body.get("model", "fake")
        self.start_stream()

        def chunk_obj(delta, finish=None):
            return {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                    "created": int(time.time()), "model": model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        self.event(r, None, chunk_obj({"role": "assistant", "content": ""}))
        pieces = self.pieces(r)
        for i, p in enumerate(pieces):
            if self.interrupt(r, i, "openai", (None, chunk_obj({"content": p}))):
                return
            if r.get("delay"):
                time.sleep(r["delay"])
            self.event(r, None, chunk_obj({"content": p}))
        if self.interrupt(r, len(pieces), "openai", (None, chunk_obj({}, "stop"))):
            return
        self.event(r, None, chunk_obj({}, r.get("finish", "stop")))
        if (body.get("stream_options") or {}).get("include_usage"):
            u = r.get("usage", {})
            self.event(r, None, {"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                                 "model": model, "choices": [],
                                 "usage": {"prompt_tokens": u.get("input", 0),
                                           "completion_tokens": u.get("output", 0),
                                           "total_tokens": u.get("input", 0) + u.get("output", 0)}})
        self.event(r, None, "[DONE]")
        self.end_stream()

    def anthropic(self, r, body):
        u = r.get("usage", {})
        self.start_stream()
        self.event(r, "message_start", {"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "content": [],
            "model": body.get("model", "fake"), "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": u.get("input", 0), "output_tokens": 1}}})
        self.event(r, "content_block_start", {"type": "content_block_start", "index": 0,
                                              "content_block": {"type": "text", "text": ""}})
        self.event(r, "ping", {"type": "ping"})
        pieces = self.pieces(r)
        for i, p in enumerate(pieces):
            ev = ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                          "delta": {"type": "text_delta", "text": p}})
            if self.interrupt(r, i, "anthropic", ev):
                return
            if r.get("delay"):
                time.sleep(r["delay"])
            self.event(r, *ev)
        stop = ("content_block_stop", {"type": "content_block_stop", "index": 0})
        if self.interrupt(r, len(pieces), "anthropic", stop):
            return
        self.event(r, *stop)
        self.event(r, "message_delta", {"type": "message_delta",
                                        "delta": {"stop_reason": r.get("finish", "end_turn"),
                                                  "stop_sequence": None},
                                        "usage": {"output_tokens": u.get("output", 0)}})
        self.event(r, "message_stop", {"type": "message_stop"})
        self.end_stream()


def main():
    global TRANSCRIPT, LOG_PATH
    if len(sys.argv) != 3:
        sys.stderr.write("usage: fake_llm_server.py TRANSCRIPT.json LOG.jsonl\n")
        sys.exit(2)
    with open(sys.argv[1]) as f:
        TRANSCRIPT = json.load(f)
    LOG_PATH = sys.argv[2]
    open(LOG_PATH, "a").close()
    parent = os.getppid()

    def watchdog():
        # A test that crashed cannot stop us: leave with the parent.
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    srv = Server(("127.0.0.1", 0), Handler)
    print(srv.server_address[1], flush=True)
    try:
        srv.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
