"""Contracts of spillway.py against real loopback servers playing hostile or failing peers:
credentials stay on their origin, a malformed digest never turns the check off, and every
Retry-After form is honoured."""

import email.utils
import hashlib
import http.server
import os
import pathlib
import subprocess
import sys
import threading
import time
import unittest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import spillway  # noqa: E402


class Peer:
    """A real HTTP server on a free loopback port. ``answer(handler)`` writes each response;
    every request's time, path and headers are recorded."""

    def __init__(self, answer):
        self.requests = []
        peer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                peer.requests.append((time.monotonic(), self.path, dict(self.headers)))
                answer(self)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def send(h, status, body=b"", **headers):
    h.send_response(status)
    for k, v in headers.items():
        h.send_header(k.replace("_", "-"), v)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


class PeerTest(unittest.TestCase):
    def peer(self, answer) -> Peer:
        p = Peer(answer)
        self.addCleanup(p.close)
        return p


class RedirectCredentialsTest(PeerTest):
    def test_credentials_stay_on_their_origin(self):
        body = b"stored bytes"
        # The storage host: another port of the same address, i.e. another origin.
        storage = self.peer(lambda h: send(h, 200, body))

        def front(h):
            if h.path.startswith("/a/away"):
                send(h, 302, Location=storage.url + "/bucket/object?X-Amz-Signature=x")
            elif h.path.startswith("/a/here"):
                send(h, 302, Location="/a/final")
            else:
                send(h, 200, body)

        svc = self.peer(front)
        secret = {"Authorization": "Bearer link-token-0123456789", "Cookie": "session=1"}
        self.assertEqual(spillway.fetch(svc.url + "/a/away", headers=secret), body)
        self.assertEqual(len(storage.requests), 1)
        got = {k.lower() for k in storage.requests[0][2]}
        self.assertFalse(got & {"authorization", "cookie"}, f"credentials reached the storage host: {got}")

        # A redirect within the origin keeps them: only the boundary strips.
        self.assertEqual(spillway.fetch(svc.url + "/a/here", headers=secret), body)
        final = [r for r in svc.requests if r[1] == "/a/final"]
        self.assertEqual(len(final), 1)
        self.assertEqual(final[0][2].get("Authorization"), secret["Authorization"])


class DigestTest(PeerTest):
    def setUp(self):
        self.artifact, self.served = b"the artifact", b"something else"
        self.digest = hashlib.sha256(self.artifact).hexdigest()
        md5 = hashlib.md5(self.served).hexdigest()
        # Redirect mode with a storage host serving the wrong bytes, with an MD5 ETag as S3 does.
        self.storage = self.peer(lambda h: send(h, 200, self.served, ETag=f'"{md5}"'))
        self.front = self.peer(lambda h: send(h, 302, Location=self.storage.url + "/bucket/object"))
        self.url = self.front.url + "/a/id?t=token"
        self.link = {"httpUrl": self.url, "size": len(self.artifact), "_meta": {spillway.SHA256_META: self.digest}}

    def requests(self) -> int:
        return len(self.front.requests) + len(self.storage.requests)

    def test_malformed_digest_is_refused_before_fetching(self):
        for bad in [self.digest[:63], self.digest + "0", "sha256:" + self.digest, "g" * 64, " " + self.digest[1:]]:
            with self.assertRaises(spillway.BadDigest, msg=bad) as cm:
                spillway.fetch(self.url, sha256=bad)
            self.assertIn("64 hex digits", str(cm.exception))
            self.assertIsInstance(cm.exception, ValueError)
            link = dict(self.link, _meta={spillway.SHA256_META: bad})
            with self.assertRaises(spillway.BadDigest, msg=bad):
                spillway.fetch(link)
        self.assertEqual(self.requests(), 0)

    def test_no_digest_is_said_not_pretended(self):
        with self.assertRaises(spillway.NoDigest):
            spillway.fetch(self.url, require_sha256=True)
        with self.assertRaises(spillway.NoDigest):
            spillway.fetch({"httpUrl": self.url})  # a link without its digest
        self.assertEqual(self.requests(), 0)
        # The documented gap: a bare URL, no digest, an MD5 ETag: nothing to check against.
        self.assertEqual(spillway.fetch(self.url), self.served)

    def test_link_digest_is_checked_behind_a_redirect(self):
        for call in [lambda: spillway.fetch(self.url, sha256=self.digest),
                     lambda: spillway.fetch(self.url, sha256=self.digest.upper()),
                     lambda: spillway.fetch(dict(self.link, size=None))]:
            with self.assertRaises(spillway.IntegrityError) as cm:
                call()
            self.assertEqual(cm.exception.code, "sha256")

    def test_cli(self):
        r = subprocess.run([sys.executable, str(HERE / "spillway.py"), self.url, "--sha256", "abc", "-q"],
                           capture_output=True)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"BadDigest", r.stderr)
        r = subprocess.run([sys.executable, str(HERE / "spillway.py"), self.url, "--require-sha256", "-q"],
                           capture_output=True)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(self.requests(), 0)


class RetryAfterTest(PeerTest):
    def unavailable(self, retry_after, times=2, body=b"available at last"):
        """A real server answering 503 with Retry-After ``retry_after()`` ``times`` times, then body."""
        def answer(h):
            if len(peer.requests) <= times:
                send(h, 503, b'{"code":"unavailable","message":"storage is unavailable"}',
                     Retry_After=retry_after(), Content_Type="application/json")
            else:
                send(h, 200, body)
        peer = self.peer(answer)
        return peer

    def gaps(self, peer):
        t = [r[0] for r in peer.requests]
        return [b - a for a, b in zip(t, t[1:])]

    def check(self, retry_after, min_gap, **kw):
        peer = self.unavailable(retry_after)
        start = time.monotonic()
        self.assertEqual(spillway.fetch(peer.url + "/a/x", **kw), b"available at last")
        self.assertLess(time.monotonic() - start, 20, "the wait was not capped")
        gaps = self.gaps(peer)
        self.assertEqual(len(gaps), 2)
        for g in gaps:
            self.assertGreaterEqual(g, min_gap)

    def test_delta_seconds(self):
        self.check(lambda: "1", 0.9)

    def test_http_date(self):
        # Two seconds ahead, truncated to the second: a wait of 1 to 2 s.
        self.check(lambda: email.utils.formatdate(time.time() + 2, usegmt=True), 0.9)

    def test_wait_is_capped(self):
        self.check(lambda: "3600", 0.09, max_retry_wait=0.1)
        self.check(lambda: email.utils.formatdate(time.time() + 3600, usegmt=True), 0.09, max_retry_wait=0.1)

    def test_unparsable_falls_back_to_backoff(self):
        self.check(lambda: "soon", 0.0, max_retry_wait=0.5)

    def test_retries_run_out(self):
        peer = self.unavailable(lambda: "0", times=100)
        with self.assertRaises(spillway.Unavailable) as cm:
            spillway.fetch(peer.url, retries=2)
        self.assertEqual((cm.exception.status, cm.exception.code), (503, "unavailable"))
        self.assertEqual(len(peer.requests), 3)

    def test_parser(self):
        now = 1772366400.0  # Sun, 01 Mar 2026 12:00:00 GMT
        for value, want in [("0", 0.0), ("7", 7.0), (" 3 ", 3.0), ("99999999999999999999", 10.0),
                            ("Sun, 01 Mar 2026 12:00:04 GMT", 4.0), ("Sunday, 01-Mar-26 12:00:05 GMT", 5.0),
                            ("Sun Mar  1 12:00:06 2026", 6.0), ("Sun, 01 Mar 2026 11:00:00 GMT", 0.0),
                            ("Sun, 01 Mar 2026 13:00:00 GMT", 10.0),
                            ("", None), (None, None), ("-1", None), ("1.5", None), ("soon", None)]:
            self.assertEqual(spillway._retry_after(value, 10.0, now), want, value)


if __name__ == "__main__":
    unittest.main()
