#!/usr/bin/env python3
"""A client of resumable streams written for Spillway's tests from the draft
("Streams", resumable-streams-draft.md among the specs Spillway follows) and
Spillway's wire contract for it (mcpproxy/internal/faces/resumable/README.md).
It uses the Python standard library only, speaks MCP itself (Streamable
HTTP in either era, or newline-delimited JSON-RPC to a child's stdio), parses
Server-Sent Events itself, runs one scenario and prints a JSON report on
stdout for the Go test that started it to check. Diagnostics go to stderr.

Usage:
  streamclient.py --url URL [--token T] --era session|stateless drop-and-resume
  streamclient.py stdio-live -- COMMAND [ARG...]

drop-and-resume calls bigtool's slow_report (--seconds, --interval-ms,
--size), reads until its first progress notification, closes the
connection, polls the stream (live, expecting pending messages), polls
until it completed, resumes it from the last event id it processed, and
reports every message with its event id.

stdio-live calls slow_report over the child's stdio, and while the stream is
live polls it and resumes it, then reads to the stream's end.
"""

import argparse
import http.client
import json
import signal
import subprocess
import sys
import time
import urllib.parse

STATELESS = "2026-07-28"
SESSION = "2025-11-25"
CAPS = {"streams": {}}
INFO = {"name": "streamclient", "version": "1"}


def log(*a):
    print("streamclient:", *a, file=sys.stderr, flush=True)


class SSE:
    """Reads Server-Sent Events from a binary file-like response: each event
    as a dict {id, event, data} (data the joined data lines; id None when the
    event set none). Comments and retry fields are read and dropped."""

    def __init__(self, resp):
        self.resp = resp

    def next(self):
        ev = {"id": None, "event": None, "data": []}
        seen = False
        while True:
            raw = self.resp.readline()
            if not raw:
                return None  # the stream ended (a partial event is dropped, as the spec says)
            line = raw.decode("utf-8").rstrip("\r\n")
            if line == "":
                # An event without data (a priming event, which only sets
                # an id for Last-Event-ID) carries no message: skipped.
                if seen and "".join(ev["data"]):
                    ev["data"] = "\n".join(ev["data"])
                    return ev
                ev, seen = {"id": None, "event": None, "data": []}, False
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            seen = True
            if field == "data":
                ev["data"].append(value)
            elif field == "id":
                ev["id"] = value
            elif field == "event":
                ev["event"] = value


class HTTPClient:
    """One MCP client over Streamable HTTP. Every request is a new TCP
    connection, so that closing one is a real disconnect."""

    def __init__(self, url, token, era):
        self.url = urllib.parse.urlsplit(url)
        self.token = token
        self.era = era
        self.session = None
        self.next_id = 0

    def new_id(self):
        self.next_id += 1
        return self.next_id

    def post(self, msg, extra_headers=None):
        """POSTs msg and returns (connection, response)."""
        body = dict(msg)
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        }
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        if self.era == "stateless":
            params = dict(body.get("params") or {})
            meta = dict(params.get("_meta") or {})
            meta["io.modelcontextprotocol/protocolVersion"] = STATELESS
            meta["io.modelcontextprotocol/clientCapabilities"] = CAPS
            meta["io.modelcontextprotocol/clientInfo"] = INFO
            params["_meta"] = meta
            body["params"] = params
            headers["Mcp-Protocol-Version"] = STATELESS
            headers["Mcp-Method"] = body["method"]
            if body["method"] in ("tools/call", "prompts/get"):
                headers["Mcp-Name"] = params["name"]
            elif body["method"] == "resources/read":
                headers["Mcp-Name"] = params["uri"]
        elif self.session:
            headers["Mcp-Session-Id"] = self.session
            headers["Mcp-Protocol-Version"] = SESSION
        headers.update(extra_headers or {})
        conn = http.client.HTTPConnection(self.url.hostname, self.url.port, timeout=60)
        conn.request("POST", self.url.path or "/", json.dumps(body).encode(), headers)
        resp = conn.getresponse()
        return conn, resp

    def request(self, method, params, rid=None):
        """Sends a request (its id rid, else the next) and returns (content
        type, [(event id, message)]), every message of the answer, read to
        its end."""
        rid = self.new_id() if rid is None else rid
        conn, resp = self.post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        try:
            ctype = resp.getheader("Content-Type", "")
            if resp.getheader("Mcp-Session-Id"):
                self.session = resp.getheader("Mcp-Session-Id")
            if ctype.startswith("text/event-stream"):
                r, out = SSE(resp), []
                while (ev := r.next()) is not None:
                    out.append((ev["id"], json.loads(ev["data"])))
                return ctype, out
            body = resp.read()
            if resp.status == 202 or not body:
                return ctype, []
            if resp.status >= 300 and not ctype.startswith("application/json"):
                raise RuntimeError(f"{method}: HTTP {resp.status}: {body[:300]!r}")
            return ctype, [(None, json.loads(body))]
        finally:
            conn.close()

    def notify(self, method, params):
        conn, resp = self.post({"jsonrpc": "2.0", "method": method, "params": params})
        resp.read()
        conn.close()
        if resp.status != 202:
            raise RuntimeError(f"{method}: HTTP {resp.status}")

    def initialize(self):
        if self.era != "session":
            return None
        _, msgs = self.request("initialize", {"protocolVersion": SESSION, "capabilities": CAPS, "clientInfo": INFO})
        if not self.session:
            raise RuntimeError("initialize: no Mcp-Session-Id")
        self.notify("notifications/initialized", {})
        return msgs[-1][1]


def response_of(msgs, rid):
    for _, m in msgs:
        if m.get("id") == rid and "method" not in m:
            return m
    return None


def drop_and_resume(a):
    c = HTTPClient(a.url, a.token, a.era)
    report = {"era": a.era, "initialize": c.initialize(), "events": [], "polls": []}
    call_id = c.new_id()
    args = {"seconds": a.seconds, "interval_ms": a.interval_ms, "size": a.size}
    conn, resp = c.post({"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
                         "params": {"name": "slow_report", "arguments": args, "_meta": {"progressToken": "p1"}}})
    report["call_id"] = call_id
    report["call_content_type"] = resp.getheader("Content-Type", "")
    if not report["call_content_type"].startswith("text/event-stream"):
        raise RuntimeError(f"tools/call answered {resp.status} {report['call_content_type']}: {resp.read()[:300]!r}")
    r = SSE(resp)
    stream_id, last = None, None
    while (ev := r.next()) is not None:
        m = json.loads(ev["data"])
        report["events"].append({"phase": "call", "id": ev["id"], "message": m})
        if m.get("method") == "notifications/stream/create":
            stream_id = m["params"]["stream"]["streamId"]
        if ev["id"] is not None:
            last = ev["id"]
        if m.get("method") == "notifications/progress":
            break
    # The drop: the connection closes with the call still running.
    conn.close()
    report["stream_id"] = stream_id
    report["dropped_after"] = last
    if stream_id is None:
        raise RuntimeError("no notifications/stream/create before the first progress")

    def poll(label):
        ctype, msgs = c.request("stream/poll", {"streamId": stream_id})
        m = msgs[-1][1] if msgs else None
        report["polls"].append({"label": label, "content_type": ctype, "message": m, "at": time.monotonic() - t0})
        return (m or {}).get("result") or {}

    t0 = time.monotonic()
    time.sleep(a.wait_before_poll)
    poll("after drop")
    deadline = time.monotonic() + a.seconds + 20
    while time.monotonic() < deadline:
        time.sleep(1)
        if poll("waiting").get("status") == "completed":
            break
    report["polls"][-1]["label"] = "final"

    resume_id = c.new_id()
    params = {"streamId": stream_id}
    if last is not None:
        params["lastEventId"] = last
    report["resume_id"] = resume_id
    report["resume_last_event_id"] = last
    ctype, msgs = c.request("stream/resume", params, resume_id)
    report["resume_content_type"] = ctype
    for eid, m in msgs:
        report["events"].append({"phase": "resume", "id": eid, "message": m})
    report["resume_response"] = response_of(msgs, resume_id)
    # After a completed stream was delivered, a poll of its id.
    ctype, msgs = c.request("stream/poll", {"streamId": stream_id})
    report["poll_after_resume"] = msgs[-1][1] if msgs else None
    return report


class StdioClient:
    """One MCP client on a child's stdin and stdout (newline-delimited
    JSON-RPC, session era)."""

    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.next_id = 0
        self.seen = []  # every message read, in order

    def send(self, msg):
        self.p.stdin.write(json.dumps(msg).encode() + b"\n")
        self.p.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        return self.next_id

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("the child's stdout ended")
        m = json.loads(line)
        self.seen.append(m)
        return m

    def until(self, pred):
        while True:
            m = self.read()
            if pred(m):
                return m

    def close(self):
        self.p.stdin.close()
        try:
            self.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()


def stdio_live(a):
    c = StdioClient(a.command)
    report = {}
    try:
        rid = c.request("initialize", {"protocolVersion": SESSION, "capabilities": CAPS, "clientInfo": INFO})
        report["initialize"] = c.until(lambda m: m.get("id") == rid and "method" not in m)
        c.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        args = {"seconds": a.seconds, "interval_ms": a.interval_ms, "size": a.size}
        call = c.request("tools/call", {"name": "slow_report", "arguments": args, "_meta": {"progressToken": "p1"}})
        report["call_id"] = call
        create = c.until(lambda m: m.get("method") == "notifications/stream/create")
        stream_id = create["params"]["stream"]["streamId"]
        c.until(lambda m: m.get("method") == "notifications/progress")
        poll = c.request("stream/poll", {"streamId": stream_id})
        report["poll"] = c.until(lambda m: m.get("id") == poll and "method" not in m)
        resume = c.request("stream/resume", {"streamId": stream_id})
        report["resume_id"] = resume
        report["resume_response"] = c.until(lambda m: m.get("id") == resume and "method" not in m)
        c.until(lambda m: m.get("method") == "notifications/stream/end"
                and m["params"].get("streamId") == stream_id)
        poll = c.request("stream/poll", {"streamId": stream_id})
        report["poll_after_end"] = c.until(lambda m: m.get("id") == poll and "method" not in m)
        report["stream_id"] = stream_id
    finally:
        report["messages"] = c.seen
        c.close()
    return report


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url")
    ap.add_argument("--token", default="")
    ap.add_argument("--era", choices=["session", "stateless"], default="stateless")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--interval-ms", type=int, default=1000)
    ap.add_argument("--size", type=int, default=4000)
    ap.add_argument("--wait-before-poll", type=float, default=2)
    ap.add_argument("--timeout", type=int, default=90, help="seconds before the client gives up")
    ap.add_argument("scenario", choices=["drop-and-resume", "stdio-live"])
    ap.add_argument("command", nargs="*")
    a = ap.parse_args()
    signal.alarm(a.timeout)  # SIGALRM ends a client that waits forever
    if a.scenario == "drop-and-resume":
        if not a.url:
            ap.error("drop-and-resume needs --url")
        report = drop_and_resume(a)
    else:
        if not a.command:
            ap.error("stdio-live needs a command after --")
        report = stdio_live(a)
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
