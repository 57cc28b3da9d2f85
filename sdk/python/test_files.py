"""Where fetched bytes go, against real loopback servers: the partial file is never opened
through a link someone planted, bytes reach a stream as they arrive instead of piling up in
memory, and a 206 is taken for exactly the range it says it carries."""

import hashlib
import http.server
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import tracemalloc
import unittest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import spillway  # noqa: E402
from test_contracts import PeerTest, send  # noqa: E402

GUARD = 60.0  # a deadlock guard only: nothing asserts on time


def artifact(n: int) -> bytes:
    """n deterministic bytes (no randomness in tests)."""
    out, block = bytearray(), b"spillway"
    while len(out) < n:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:n])


def ranged(data: bytes, cut_first_at: int = 0, ignore_range: bool = False, step: int = 0):
    """An answer function serving data: the first response is cut after cut_first_at bytes
    (0: not cut); Range is honoured (unless ignore_range) with at most step bytes (0: all)."""
    state = {"n": 0}

    def answer(h):
        state["n"] += 1
        rng = h.headers.get("Range")
        if rng and not ignore_range:
            start = int(rng[len("bytes="):-1])
            end = len(data) - 1 if not step else min(len(data), start + step) - 1
            send(h, 206, data[start:end + 1], Content_Range=f"bytes {start}-{end}/{len(data)}")
            return
        if state["n"] == 1 and cut_first_at:
            h.send_response(200)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data[:cut_first_at])
            h.wfile.flush()
            h.close_connection = True
            return
        send(h, 200, data)

    return answer


class PartFileTest(PeerTest):
    def setUp(self):
        self.data = artifact(300_000)
        self.url = self.peer(lambda h: send(h, 200, self.data)).url + "/a/x"
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.out = os.path.join(self.dir.name, "out.bin")
        self.part = self.out + ".part"
        self.victim = os.path.join(self.dir.name, "victim")
        pathlib.Path(self.victim).write_bytes(b"precious")

    def test_planted_symlink_is_not_written_through(self):
        os.symlink(self.victim, self.part)
        with self.assertRaises(spillway.SpillwayError) as cm:
            spillway.fetch(self.url, self.out)
        self.assertEqual(cm.exception.code, "path")
        self.assertEqual(pathlib.Path(self.victim).read_bytes(), b"precious")
        self.assertFalse(os.path.lexists(self.out))
        self.assertTrue(os.path.islink(self.part), "the planted link is left for its owner to see")

    def test_dangling_symlink_is_not_followed(self):
        target = os.path.join(self.dir.name, "created-by-us")
        os.symlink(target, self.part)
        with self.assertRaises(spillway.SpillwayError):
            spillway.fetch(self.url, self.out)
        self.assertFalse(os.path.lexists(target))

    def test_directory_is_refused(self):
        os.mkdir(self.part)
        with self.assertRaises(spillway.SpillwayError) as cm:
            spillway.fetch(self.url, self.out)
        self.assertEqual(cm.exception.code, "path")

    def test_hard_link_is_not_written_through(self):
        os.link(self.victim, self.part)
        self.assertEqual(spillway.fetch(self.url, self.out), self.out)
        self.assertEqual(pathlib.Path(self.victim).read_bytes(), b"precious")
        self.assertEqual(pathlib.Path(self.out).read_bytes(), self.data)

    def test_stale_partial_file_is_replaced(self):
        pathlib.Path(self.part).write_bytes(b"left over by a crash" * 100_000)
        self.assertEqual(spillway.fetch(self.url, self.out), self.out)
        self.assertEqual(pathlib.Path(self.out).read_bytes(), self.data)
        self.assertFalse(os.path.lexists(self.part))


class StreamTest(PeerTest):
    def test_cli_writes_to_stdout_as_bytes_arrive(self):
        data = artifact(2 << 20)
        half = len(data) // 2
        seen = threading.Event()   # the test read bytes from the CLI's stdout
        waited = {}

        def answer(h):
            h.send_response(200)
            h.send_header("Content-Length", str(len(data)))
            h.end_headers()
            h.wfile.write(data[:half])
            h.wfile.flush()
            # The rest only once the first half came out of the CLI: a client that holds the
            # artifact until its end would never get it (the guard then lets the test fail).
            waited["streamed"] = seen.wait(GUARD)
            h.wfile.write(data[half:])

        url = self.peer(answer).url + "/a/x"
        p = subprocess.Popen([sys.executable, str(HERE / "spillway.py"), url, "-q",
                              "--sha256", hashlib.sha256(data).hexdigest()],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        with p:
            first = p.stdout.read(1)
            seen.set()
            rest = p.stdout.read()
            err = p.stderr.read()
        self.assertEqual(p.returncode, 0, err)
        self.assertTrue(waited["streamed"], "nothing reached stdout before the whole artifact had arrived")
        self.assertEqual(first + rest, data)

    def test_file_object_is_written_with_bounded_memory(self):
        data = artifact(24 << 20)
        url = self.peer(lambda h: send(h, 200, data)).url + "/a/x"
        digest = hashlib.sha256(data).hexdigest()
        with open(os.devnull, "wb") as sink:
            tracemalloc.start()
            try:
                got = spillway.fetch(url, sink, sha256=digest)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
        self.assertIs(got, sink)
        self.assertLess(peak, 4 << 20, f"peak {peak} bytes for a {len(data)} byte artifact")

    def test_stream_resumes_when_the_server_starts_over(self):
        # Cut after 100 KB; the server then ignores Range and sends everything again: a stream
        # cannot be rewound, so the repeated prefix is checked against what was written, then
        # skipped.
        data = artifact(400_000)
        peer = self.peer(ranged(data, cut_first_at=100_000, ignore_range=True))
        out = tempfile.TemporaryFile()
        self.addCleanup(out.close)
        spillway.fetch(peer.url + "/a/x", out, sha256=hashlib.sha256(data).hexdigest())
        out.seek(0)
        self.assertEqual(out.read(), data)
        self.assertEqual(peer.requests[1][2].get("Range"), "bytes=100000-")

    def test_stream_refuses_a_changed_prefix(self):
        data, other = artifact(400_000), artifact(400_001)[1:]
        bodies = iter([data, other])

        def answer(h):
            body = next(bodies)
            h.send_response(200)
            h.send_header("Content-Length", str(len(body)))
            h.end_headers()
            h.wfile.write(body if body is other else body[:100_000])
            h.close_connection = True

        url = self.peer(answer).url + "/a/x"
        with tempfile.TemporaryFile() as out, self.assertRaises(spillway.IntegrityError) as cm:
            spillway.fetch(url, out)
        self.assertEqual(cm.exception.code, "changed")


class RangeTest(PeerTest):
    def test_206_without_range_is_refused(self):
        data = artifact(1000)
        url = self.peer(lambda h: send(h, 206, data[:100], Content_Range=f"bytes 0-99/{len(data)}")).url
        with self.assertRaises(spillway.IntegrityError) as cm:
            spillway.fetch(url + "/a/x")
        self.assertEqual(cm.exception.code, "range")

    def test_short_206_is_resumed_to_the_complete_length(self):
        # Cut at 300 bytes; each resumption gets at most 300 bytes although the rest was asked.
        data = artifact(1000)
        peer = self.peer(ranged(data, cut_first_at=300, step=300))
        self.assertEqual(spillway.fetch(peer.url + "/a/x"), data)
        self.assertEqual([r[2].get("Range") for r in peer.requests],
                         [None, "bytes=300-", "bytes=600-", "bytes=900-"])

    def resumed_with(self, content_range: str, body: bytes):
        """Fetch 1000 bytes cut after 300, resumed with a 206 of body and content_range: it must
        raise IntegrityError with code "range"."""
        data = artifact(1000)
        first = {"done": False}

        def answer(h):
            if not first["done"]:
                first["done"] = True
                ranged(data, cut_first_at=300)(h)
                return
            send(h, 206, body, Content_Range=content_range)

        url = self.peer(answer).url
        with self.assertRaises(spillway.IntegrityError) as cm:
            spillway.fetch(url + "/a/x")
        self.assertEqual(cm.exception.code, "range")

    def test_content_range_must_match_the_body(self):
        self.resumed_with("bytes 300-599/1000", artifact(1000)[300:])  # 700 bytes for 300

    def test_complete_length_must_not_change(self):
        self.resumed_with("bytes 300-999/2000", artifact(1000)[300:])

    def test_content_range_must_start_where_asked(self):
        self.resumed_with("bytes 0-999/1000", artifact(1000))


if __name__ == "__main__":
    unittest.main()
