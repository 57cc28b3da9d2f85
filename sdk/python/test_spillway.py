"""Tests of spillway.py against a real `spillway serve`, built from this repository."""

import hashlib
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
import spillway  # noqa: E402

TOKEN = "python-sdk-test-token-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CuttingProxy:
    """A loopback TCP proxy that cuts the first `cuts` connections after `after` bytes of response."""

    def __init__(self, target_port: int, after: int, cuts: int = 1):
        self.target, self.after, self.cuts = target_port, after, cuts
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            limit = self.after if self.cuts > 0 else None
            self.cuts -= 1
            threading.Thread(target=self._pipe, args=(c, limit), daemon=True).start()

    def _pipe(self, client, limit):
        up = socket.create_connection(("127.0.0.1", self.target))

        def forward(src, dst):
            try:
                while True:
                    b = src.recv(65536)
                    if not b:
                        break
                    dst.sendall(b)
            except OSError:
                pass

        threading.Thread(target=forward, args=(client, up), daemon=True).start()
        sent = 0
        try:
            while True:
                b = up.recv(65536)
                if not b:
                    break
                if limit is not None and sent + len(b) > limit:
                    client.sendall(b[: limit - sent])
                    break  # cut mid-body
                client.sendall(b)
                sent += len(b)
        except OSError:
            pass
        for s in (client, up):  # shutdown, not just close: wake the other thread, send FIN
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def close(self):
        self.sock.close()


class FetchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        binary = os.environ.get("SPILLWAY_BIN")
        if not binary:
            binary = os.path.join(cls.tmp.name, "spillway")
            subprocess.run(["go", "build", "-o", binary, "./cmd/spillway"], cwd=ROOT, check=True)
        cls.port = free_port()
        cls.proc = subprocess.Popen(
            [binary, "serve", "--listen", f"127.0.0.1:{cls.port}", "--data", cls.tmp.name,
             "--auth-tokens", f"{TOKEN}=py", "--log-level", "error"],
        )
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{cls.port}/readyz", timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait()
        cls.tmp.cleanup()

    def upload(self, data: bytes, mime="application/octet-stream", ttl="10m") -> dict:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/v1/artifacts?ttl={ttl}", data=data, method="POST",
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": mime})
        with urllib.request.urlopen(req) as r:
            return json.load(r)

    def test_fetch_bytes_and_file(self):
        data = os.urandom(3 << 20)
        link = self.upload(data)
        got = spillway.fetch(link["httpUrl"], sha256=link["_meta"][spillway.SHA256_META],
                             expires_at=link["httpUrlExpiresAt"], size=link["size"])
        self.assertEqual(got, data)
        self.assertEqual(spillway.fetch(link), data)  # the link itself: its digest, size and expiry
        seen = []
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "out.bin")
            self.assertEqual(spillway.fetch(link["httpUrl"], p, progress=lambda n, t: seen.append((n, t))), p)
            self.assertEqual(pathlib.Path(p).read_bytes(), data)
            self.assertFalse(os.path.exists(p + ".part"))
        self.assertEqual(seen[-1], (len(data), len(data)))

    def test_json_and_text(self):
        link = self.upload(json.dumps({"rows": [1, 2, 3]}).encode(), "application/json")
        self.assertEqual(spillway.load_json(link["httpUrl"]), {"rows": [1, 2, 3]})
        self.assertIn('"rows"', spillway.open_text(link["httpUrl"]))

    def test_errors_carry_the_code(self):
        link = self.upload(b"secret bytes")
        url = link["httpUrl"]
        with self.assertRaises(spillway.LinkExpired):
            spillway.fetch(url, expires_at="2001-01-01T00:00:00Z")  # refused locally
        tampered = url[:-1] + ("A" if url[-1] != "A" else "B")
        with self.assertRaises(spillway.AccessDenied) as cm:
            spillway.fetch(tampered)
        self.assertEqual((cm.exception.status, cm.exception.code), (403, "forbidden"))
        with self.assertRaises(spillway.IntegrityError) as cm:
            spillway.fetch(url, sha256="0" * 64)
        self.assertEqual(cm.exception.code, "sha256")
        with self.assertRaises(spillway.IntegrityError):
            spillway.fetch(url, size=5)
        short = self.upload(b"x", ttl="1s")
        time.sleep(2.2)
        with self.assertRaises(spillway.LinkExpired) as cm:
            spillway.fetch(short["httpUrl"])
        self.assertEqual(cm.exception.status, 410)
        art = short["uri"].rsplit("/", 1)[1]
        gone = self.upload(b"to be deleted")
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}/v1/artifacts/{gone['uri'].rsplit('/', 1)[1]}",
                                     method="DELETE", headers={"Authorization": f"Bearer {TOKEN}"})
        urllib.request.urlopen(req).close()
        with self.assertRaises(spillway.NotFound) as cm:
            spillway.fetch(gone["httpUrl"])
        self.assertEqual(cm.exception.status, 404)
        self.assertTrue(art)

    def test_resumes_after_a_cut(self):
        data = os.urandom(8 << 20)
        link = self.upload(data)
        proxy = CuttingProxy(self.port, after=3 << 20, cuts=2)
        try:
            url = link["httpUrl"].replace(f":{self.port}/", f":{proxy.port}/")
            got = spillway.fetch(url, sha256=link["_meta"][spillway.SHA256_META])
        finally:
            proxy.close()
        self.assertEqual(hashlib.sha256(got).hexdigest(), hashlib.sha256(data).hexdigest())

    def test_cli(self):
        data = os.urandom(100_000)
        link = self.upload(data)
        with tempfile.TemporaryDirectory() as d:
            lp, out = os.path.join(d, "link.json"), os.path.join(d, "out")
            pathlib.Path(lp).write_text(json.dumps(link))
            r = subprocess.run([sys.executable, str(HERE / "spillway.py"), lp, "-o", out], capture_output=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(pathlib.Path(out).read_bytes(), data)
            url = link["httpUrl"]
            tampered = url[:-1] + ("A" if url[-1] != "A" else "B")
            r = subprocess.run([sys.executable, "-m", "spillway", tampered, "-q"],
                               capture_output=True, cwd=HERE)
            self.assertEqual(r.returncode, 4, r.stderr)

    def test_requests_client(self):
        try:
            import requests
        except ImportError:
            self.skipTest("requests is not installed (Debian: python3-requests)")
        data = os.urandom(1 << 20)
        link = self.upload(data)
        r = requests.get(link["httpUrl"], timeout=30)
        self.assertEqual(r.status_code, 200)
        self.assertEqual(hashlib.sha256(r.content).hexdigest(), link["_meta"][spillway.SHA256_META])
        r = requests.get(link["httpUrl"].split("?")[0], headers={"Authorization": "Bearer " + link["httpUrl"].split("t=")[1]})
        self.assertEqual(r.content, data)


if __name__ == "__main__":
    unittest.main()
