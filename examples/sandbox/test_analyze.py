"""Tests of analyze.py.

The analysis is tested on bytes built here; the command line is tested
end to end through the Spillway Python SDK against a tiny local HTTP server
that serves those bytes (the walkthrough runs it against a real Spillway).
Without the SDK the end-to-end tests skip, unless CI is set: then they fail.

Run: python3 -m unittest discover -s examples/sandbox -v
"""

from __future__ import annotations

import csv
import hashlib
import http.server
import importlib.util
import io
import json
import os
import pathlib
import random
import statistics
import struct
import subprocess
import sys
import threading
import unittest
import zlib

HERE = pathlib.Path(__file__).resolve().parent
SCRIPT = HERE / "analyze.py"

_spec = importlib.util.spec_from_file_location("analyze", SCRIPT)
analyze = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(analyze)


def orders(n: int, seed: int) -> list[dict]:
    r = random.Random(seed)
    rows = []
    for i in range(n):
        qty = r.randint(1, 12)
        unit = round(r.uniform(5, 500), 2)
        rows.append({
            "id": f"ORD-{i + 1:08d}",
            "customer": r.choice(["Acme", "Globex", "Initech", "Umbrella", "Hooli"]),
            "region": r.choice(["EMEA", "AMER", "APAC"]),
            "quantity": qty,
            "unit_price": unit,
            "amount": round(qty * unit, 2),
            "shipped": r.random() < 0.7,
        })
    return rows


def to_csv(rows: list[dict], delimiter: str = ",") -> bytes:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]), delimiter=delimiter, lineterminator="\r\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode()


def png(width: int, height: int, color_type: int = 2, extra: list[tuple[bytes, bytes]] = ()) -> bytes:
    """A valid PNG written by hand: gradient pixels, RGB or grayscale."""
    channels = {0: 1, 2: 3, 6: 4}[color_type]
    raw = b"".join(b"\x00" + bytes((x + y) % 256 for x in range(width) for _ in range(channels)) for y in range(height))

    def chunk(t: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + t + body + struct.pack(">I", zlib.crc32(t + body))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, color_type, 0, 0, 0)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
    for t, body in extra:
        out += chunk(t, body)
    return out + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def expected_columns(rows: list[dict], from_csv: bool) -> dict[str, dict]:
    """Per-column statistics computed the plain way, to compare with Column."""
    out = {}
    for name in rows[0]:
        vals = [r[name] for r in rows]
        if from_csv:
            vals = [str(v) for v in vals]
        nums = []
        for v in vals:
            if isinstance(v, bool):
                continue
            try:
                nums.append(float(v))
            except (TypeError, ValueError):
                pass
        c = {"count": len(vals), "distinct": len(set(vals))}
        if nums and len(nums) == len(vals):
            c.update(min=min(nums), max=max(nums), mean=statistics.fmean(nums))
        out[name] = c
    return out


class AnalysisTest(unittest.TestCase):
    def check_table(self, result: dict, rows: list[dict], from_csv: bool) -> None:
        self.assertEqual(result["rows"], len(rows))
        got = {c["name"]: c for c in result["columns"]}
        self.assertEqual(list(got), list(rows[0]))
        for name, want in expected_columns(rows, from_csv).items():
            c = got[name]
            self.assertEqual(c["count"], want["count"], name)
            self.assertEqual(c["distinct"], want["distinct"], name)
            self.assertEqual(c["nulls"], 0, name)
            if "mean" in want:
                self.assertEqual(c["type"], "number", name)
                self.assertAlmostEqual(c["min"], want["min"], places=6, msg=name)
                self.assertAlmostEqual(c["max"], want["max"], places=6, msg=name)
                self.assertAlmostEqual(c["mean"], want["mean"], places=4, msg=name)
            else:
                self.assertNotIn("mean", c, name)

    def test_json_rows(self):
        rows = orders(2000, 1)
        data = json.dumps(rows).encode()
        r = analyze.analyze_bytes(data, "application/json")
        self.assertEqual(r["kind"], "json-rows")
        self.assertEqual(r["bytes"], len(data))
        self.assertEqual(r["sha256"], hashlib.sha256(data).hexdigest())
        self.check_table(r, rows, from_csv=False)
        cols = {c["name"]: c for c in r["columns"]}
        self.assertEqual(cols["shipped"]["type"], "boolean")
        self.assertEqual(cols["shipped"]["distinct"], 2)
        top_region = max(("EMEA", "AMER", "APAC"), key=lambda x: sum(1 for o in rows if o["region"] == x))
        self.assertEqual(cols["region"]["top"]["value"], top_region)

    def test_json_wrapped_rows_and_missing_keys(self):
        rows = [{"a": 1, "b": "x"}, {"a": 3}, {"a": 5, "b": "y", "c": None}, {"c": 2}]
        r = analyze.analyze_bytes(json.dumps({"meta": {"n": 4}, "rows": rows}).encode(), "")
        self.assertEqual(r["kind"], "json-rows")
        self.assertEqual(r["path"], "rows")
        cols = {c["name"]: c for c in r["columns"]}
        self.assertEqual((cols["a"]["count"], cols["a"]["nulls"], cols["a"]["mean"]), (3, 1, 3))
        self.assertEqual((cols["b"]["count"], cols["b"]["nulls"]), (2, 2))
        self.assertEqual((cols["c"]["count"], cols["c"]["nulls"]), (1, 3))

    def test_json_other(self):
        r = analyze.analyze_bytes(b'{"a": 1, "b": [1, 2]}', "application/json")
        self.assertEqual((r["kind"], r["keys"]), ("json", ["a", "b"]))
        r = analyze.analyze_bytes(b"[1, 2, 3]", "")
        self.assertEqual((r["kind"], r["length"]), ("json", 3))

    def test_csv(self):
        rows = orders(1500, 2)
        for delim in (",", ";", "\t"):
            with self.subTest(delimiter=delim):
                r = analyze.analyze_bytes(to_csv(rows, delim), "text/csv")
                self.assertEqual(r["kind"], "csv")
                self.assertEqual(r["delimiter"], delim)
                self.check_table(r, rows, from_csv=True)

    def test_csv_sniffed_without_mime_and_ragged(self):
        data = b"a,b,c\n1,2,3\n4,5\n6,7,8,9\n"
        r = analyze.analyze_bytes(data, "")
        self.assertEqual((r["kind"], r["rows"]), ("csv", 3))
        cols = {c["name"]: c for c in r["columns"]}
        self.assertEqual(cols["c"]["nulls"], 1)
        self.assertEqual(cols["column_4"]["count"], 1)
        self.assertEqual(cols["a"]["max"], 6)

    def test_png(self):
        for w, h, ct, name in ((37, 11, 2, "rgb"), (5, 300, 0, "grayscale"), (64, 64, 6, "rgba")):
            with self.subTest(color=name):
                data = png(w, h, ct, extra=[(b"tEXt", b"Title\x00chart")])
                r = analyze.analyze_bytes(data, "image/png")
                self.assertEqual((r["kind"], r["width"], r["height"], r["color_type"]), ("png", w, h, name))
                self.assertEqual(r["chunks"], {"IHDR": 1, "tEXt": 1, "IDAT": 1, "IEND": 1})
                self.assertTrue(r["complete"])

    def test_png_damage_is_reported(self):
        good = png(20, 20)
        cases = {
            "truncated": good[:-20],
            "bad crc": good[:20] + bytes([good[20] ^ 1]) + good[21:],
            "bad signature": b"\x89PNX" + good[4:],
            "no ihdr": good[:8] + good[33:],
        }
        for name, data in cases.items():
            with self.subTest(name):
                r = analyze.analyze_bytes(data, "image/png")
                self.assertIn("error", r)
                self.assertEqual(r["claimed"], "png")

    def test_text_and_binary(self):
        r = analyze.analyze_bytes(b"one two\nthree\n", "text/plain")
        self.assertEqual((r["kind"], r["lines"], r["words"]), ("text", 2, 3))
        r = analyze.analyze_bytes(bytes(range(256)), "application/octet-stream")
        self.assertEqual(r["kind"], "binary")

    def test_bad_json_falls_back(self):
        r = analyze.analyze_bytes(b'[{"a": 1}, {"a": ', "application/json")
        self.assertEqual((r["kind"], r["claimed"]), ("text", "json"))
        self.assertIn("invalid JSON", r["error"])

    def test_random_damage_never_raises(self):
        """Seeded fuzzing: damaged inputs of every kind give a result, never an exception."""
        rnd = random.Random(20260728)
        seeds = [json.dumps(orders(30, 3)).encode(), to_csv(orders(30, 4)), png(16, 16), b"plain text\n"]
        for i in range(600):
            data = bytearray(rnd.choice(seeds))
            for _ in range(rnd.randint(1, 8)):
                op = rnd.randrange(3)
                p = rnd.randrange(len(data) or 1)
                if op == 0 and data:
                    data[p] = rnd.randrange(256)
                elif op == 1:
                    del data[p : p + rnd.randint(1, 64)]
                else:
                    data[p:p] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 16)))
            mime = rnd.choice(["", "application/json", "text/csv", "image/png", "text/plain"])
            try:
                r = analyze.analyze_bytes(bytes(data), mime)
            except Exception as e:  # noqa: BLE001 - any exception is the failure being tested
                self.fail(f"case {i} ({mime}): {type(e).__name__}: {e}")
            self.assertIn("kind", r)
            self.assertEqual(r["bytes"], len(data))


class InputTest(unittest.TestCase):
    def test_parse_input(self):
        self.assertEqual(analyze.parse_input(" https://h/a/x?t=1 \n"), [{"httpUrl": "https://h/a/x?t=1"}])
        link = {"type": "resource_link", "uri": "spillway://a/1", "httpUrl": "http://h/a/1?t=x", "size": 3}
        self.assertEqual(analyze.parse_input(json.dumps(link)), [link])
        result = {"content": [{"type": "text", "text": "preview"}, link, {**link, "httpUrl": "http://h/a/2?t=y"}],
                  "structuredContent": {"rows": 3}}
        self.assertEqual([x["httpUrl"] for x in analyze.parse_input(json.dumps(result))],
                         ["http://h/a/1?t=x", "http://h/a/2?t=y"])
        for bad in ("", "not a url", '{"content": []}', "[1, 2"):
            with self.subTest(bad=bad), self.assertRaises(analyze.AnalysisError):
                analyze.parse_input(bad)

    def test_redact(self):
        self.assertEqual(analyze.redact("https://s.example/a/abc?t=SECRET"), "https://s.example/a/abc")


class _Handler(http.server.BaseHTTPRequestHandler):
    routes: dict[str, tuple[int, str, bytes]] = {}

    def do_GET(self):  # noqa: N802 - http.server's naming
        status, ctype, body = self.routes.get(self.path.split("?")[0], (404, "application/json", b'{"code":"not_found"}'))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def sdk_present() -> bool:
    try:
        analyze.load_sdk()
        return True
    except ImportError:
        return False


class EndToEndTest(unittest.TestCase):
    """analyze.py as a program, fetching through the SDK from a local HTTP server."""

    @classmethod
    def setUpClass(cls):
        if not sdk_present():
            msg = "Spillway Python SDK not found (looked in " + ", ".join(map(str, analyze.sdk_dirs())) + ")"
            if os.environ.get("CI"):
                raise AssertionError(msg)
            raise unittest.SkipTest(msg)
        cls.rows = orders(3000, 5)
        cls.files = {
            "/a/rows": ("application/json", json.dumps(cls.rows).encode()),
            "/a/csv": ("text/csv", to_csv(cls.rows)),
            "/a/png": ("image/png", png(300, 200)),
        }
        _Handler.routes = {p: (200, t, b) for p, (t, b) in cls.files.items()}
        _Handler.routes["/a/expired"] = (410, "application/json", b'{"code":"expired","message":"link expired"}')
        _Handler.routes["/a/denied"] = (403, "application/json", b'{"code":"forbidden","message":"forbidden"}')
        cls.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        cls.base = f"http://127.0.0.1:{cls.server.server_port}"
        threading.Thread(target=cls.server.serve_forever, daemon=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.server.server_close()

    def run_script(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(SCRIPT), *args], input=stdin, capture_output=True,
                              text=True, timeout=60)

    def link(self, path: str, **over) -> dict:
        mime, body = self.files[path]
        link = {"type": "resource_link", "uri": "spillway://artifacts" + path, "name": path[3:], "mimeType": mime,
                "size": len(body), "httpUrl": f"{self.base}{path}?t=TOKEN", "httpUrlExpiresAt": "2999-01-01T00:00:00Z",
                "_meta": {"dev.spillway/sha256": hashlib.sha256(body).hexdigest()}}
        link.update(over)
        return link

    def test_url_argument(self):
        for path in self.files:
            with self.subTest(path):
                p = self.run_script("--json", f"{self.base}{path}?t=TOKEN")
                self.assertEqual(p.returncode, 0, p.stderr)
                got = json.loads(p.stdout)
                mime, body = self.files[path]
                want = analyze.analyze_bytes(body, "")
                self.assertEqual(got["source"], f"{self.base}{path}")  # the token is not printed
                self.assertNotIn("TOKEN", p.stdout + p.stderr)
                del got["source"]
                self.assertEqual(got, want)

    def test_link_on_stdin_and_text_output(self):
        p = self.run_script(stdin=json.dumps(self.link("/a/rows")))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("kind: json-rows", p.stdout)
        self.assertIn(f"rows: {len(self.rows)}", p.stdout)
        self.assertIn("amount", p.stdout)

    def test_tool_result_with_two_links(self):
        result = {"content": [{"type": "text", "text": "preview"}, self.link("/a/csv"), self.link("/a/png")]}
        p = self.run_script("--json", "-", stdin=json.dumps(result))
        self.assertEqual(p.returncode, 0, p.stderr)
        got = json.loads(p.stdout)
        self.assertEqual([g["kind"] for g in got], ["csv", "png"])
        self.assertEqual(got[0]["rows"], len(self.rows))
        self.assertEqual((got[1]["width"], got[1]["height"]), (300, 200))

    def test_checksum_mismatch(self):
        bad = self.link("/a/rows", _meta={"dev.spillway/sha256": "0" * 64})
        p = self.run_script(stdin=json.dumps(bad))
        self.assertEqual(p.returncode, 6, p.stdout + p.stderr)
        self.assertIn("IntegrityError", p.stderr)

    def test_server_errors(self):
        for path, code, err in (("/a/expired", 3, "LinkExpired"), ("/a/denied", 4, "AccessDenied"),
                                ("/a/gone", 5, "NotFound")):
            with self.subTest(path):
                p = self.run_script(f"{self.base}{path}?t=TOKEN")
                self.assertEqual(p.returncode, code, p.stderr)
                self.assertIn(err, p.stderr)
                self.assertNotIn("TOKEN", p.stderr)

    def test_usage_errors(self):
        p = self.run_script(stdin="hello")
        self.assertEqual(p.returncode, 2)
        self.assertIn("neither a URL nor JSON", p.stderr)


if __name__ == "__main__":
    unittest.main()
