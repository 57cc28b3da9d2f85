#!/usr/bin/env python3
"""Fetch a Spillway artifact by its httpUrl and print an analysis of it.

This is what sandboxed code does with the resource_link an agent hands it:
one plain HTTP GET (through the Spillway Python SDK, which checks size and
SHA-256 and retries a dropped connection), then some work on the bytes.

Usage:
    analyze.py URL                 analyze the artifact at URL
    analyze.py link.json           a resource_link (or a whole tool result) in a file
    analyze.py [-] < link.json     ... or on stdin; a bare URL on stdin works too
    analyze.py --json ...          print the analysis as JSON instead of text

What it prints:
    JSON array of objects, CSV   row count and, per column: count, nulls,
                                 distinct values, the most common value, and
                                 min/max/mean for numeric columns
    PNG                          dimensions, bit depth, colour type, chunks
    anything else                size, lines, SHA-256

Exit status: 0 ok, 1 other error, 2 usage, 3 link expired, 4 access denied,
5 not found, 6 integrity error (size or checksum mismatch).

The SDK module is one stdlib-only file. It is looked for next to this
script, in $SPILLWAY_PYTHON_SDK, and in ../../sdk/python of the repository.
Only Python 3.11's standard library is needed besides it.
"""

from __future__ import annotations

import argparse
import collections
import csv
import hashlib
import importlib
import io
import json
import math
import os
import pathlib
import struct
import sys
import urllib.parse
import zlib
from typing import Any, Iterable, Iterator

HERE = pathlib.Path(__file__).resolve().parent
SHA256_META = "dev.spillway/sha256"

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
EXIT_BY_ERROR = {"LinkExpired": 3, "AccessDenied": 4, "NotFound": 5, "IntegrityError": 6}


class AnalysisError(Exception):
    """Input that cannot be analyzed as what it claims to be."""


# --------------------------------------------------------------------------
# The SDK


def sdk_dirs() -> list[pathlib.Path]:
    """Folders searched for the SDK module, in order."""
    dirs = [HERE]
    if os.environ.get("SPILLWAY_PYTHON_SDK"):
        dirs.append(pathlib.Path(os.environ["SPILLWAY_PYTHON_SDK"]))
    dirs.append(HERE.parent.parent / "sdk" / "python")
    return dirs


def load_sdk() -> Any:
    """Import the Spillway Python SDK module (it provides fetch())."""
    for d in reversed(sdk_dirs()):
        if d.is_dir() and str(d) not in sys.path:
            sys.path.insert(0, str(d))
    try:
        mod = importlib.import_module("spillway")
        if hasattr(mod, "fetch"):
            return mod
    except ImportError:
        pass
    # The SDK is one file; accept any module name for it.
    for d in sdk_dirs():
        if not d.is_dir():
            continue
        for f in sorted(d.glob("*.py")):
            if f.stem in ("setup", "analyze", "__init__", "__main__") or f.stem.startswith("test"):
                continue
            try:
                mod = importlib.import_module(f.stem)
            except Exception:  # a stray file that does not import is not the SDK
                continue
            if callable(getattr(mod, "fetch", None)) and hasattr(mod, "IntegrityError"):
                return mod
    raise ImportError(
        "Spillway Python SDK not found: copy its module next to analyze.py, "
        "or set SPILLWAY_PYTHON_SDK to its folder"
    )


# --------------------------------------------------------------------------
# Input: a URL, a resource_link, or a tool result holding resource_links


def find_links(doc: Any) -> list[dict[str, Any]]:
    """Return every object with an httpUrl in doc (a link, a list, a tool result)."""
    out: list[dict[str, Any]] = []

    def walk(v: Any, depth: int) -> None:
        if depth > 32:
            return
        if isinstance(v, dict):
            if isinstance(v.get("httpUrl"), str):
                out.append(v)
                return
            for x in v.values():
                walk(x, depth + 1)
        elif isinstance(v, list):
            for x in v:
                walk(x, depth + 1)

    walk(doc, 0)
    return out


def parse_input(text: str) -> list[dict[str, Any]]:
    """Turn argv/stdin text into a list of link dicts (a bare URL becomes {"httpUrl": URL})."""
    text = text.strip()
    if not text:
        raise AnalysisError("no input: give an httpUrl or a resource_link JSON")
    if text.startswith(("http://", "https://")) and "\n" not in text:
        return [{"httpUrl": text}]
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise AnalysisError(f"input is neither a URL nor JSON: {e}") from None
    links = find_links(doc)
    if not links:
        raise AnalysisError("no httpUrl found in the input JSON")
    return links


def redact(url: str) -> str:
    """The URL without its query: the query holds the token, which must not be printed."""
    p = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((p.scheme, p.netloc, p.path, "", ""))


def fetch_link(sdk: Any, link: dict[str, Any], timeout: float) -> bytes:
    """Fetch one link with the SDK, handing it every check the link allows."""
    kw: dict[str, Any] = {"timeout": timeout}
    if link.get("httpUrlExpiresAt"):
        kw["expires_at"] = link["httpUrlExpiresAt"]
    meta = link.get("_meta") or {}
    if isinstance(meta, dict) and meta.get(SHA256_META):
        kw["sha256"] = meta[SHA256_META]
    if isinstance(link.get("size"), int):
        kw["size"] = link["size"]
    return sdk.fetch(link["httpUrl"], **kw)


# --------------------------------------------------------------------------
# Analysis


class Column:
    """Streaming statistics of one column."""

    TOP_LIMIT = 100_000  # distinct values remembered; beyond this, distinct is a lower bound

    def __init__(self, name: str) -> None:
        self.name = name
        self.count = 0
        self.nulls = 0
        self.counts: collections.Counter[Any] = collections.Counter()
        self.truncated = False
        self.types: set[str] = set()
        self.n = 0
        self.total = 0.0
        self.min: float | None = None
        self.max: float | None = None

    def add(self, v: Any) -> None:
        if v is None or v == "":
            self.nulls += 1
            return
        self.count += 1
        num = as_number(v)
        if num is not None:
            self.types.add("number")
            self.n += 1
            self.total += num
            self.min = num if self.min is None else min(self.min, num)
            self.max = num if self.max is None else max(self.max, num)
        elif isinstance(v, bool):
            self.types.add("boolean")
        elif isinstance(v, str):
            self.types.add("string")
        else:
            self.types.add("object" if isinstance(v, dict) else "array" if isinstance(v, list) else type(v).__name__)
        # Scalars count as themselves (1 and 1.0 are one value); anything else by its JSON text.
        key = v if isinstance(v, (str, int, float)) and not isinstance(v, bool) else json.dumps(v, sort_keys=True)
        if key in self.counts or len(self.counts) < self.TOP_LIMIT:
            self.counts[key] += 1
        else:
            self.truncated = True

    def result(self) -> dict[str, Any]:
        r: dict[str, Any] = {
            "name": self.name,
            "type": self.types.pop() if len(self.types) == 1 else ("mixed" if self.types else "empty"),
            "count": self.count,
            "nulls": self.nulls,
            "distinct": len(self.counts),
        }
        if self.truncated:
            r["distinct_at_least"] = True
        if self.counts:
            value, n = self.counts.most_common(1)[0]
            r["top"] = {"value": value, "count": n}
        if self.n and self.min is not None and self.max is not None:
            r["min"], r["max"] = tidy(self.min), tidy(self.max)
            r["mean"] = tidy(round(self.total / self.n, 6))
            if self.n != self.count:
                r["numeric_count"] = self.n
        return r


def as_number(v: Any) -> float | None:
    """A finite number in v (JSON number or numeric CSV text), else None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        f = float(v)
    elif isinstance(v, str) and 0 < len(v) < 64:
        try:
            f = float(v)
        except ValueError:
            return None
    else:
        return None
    return f if math.isfinite(f) else None


def tidy(f: float) -> int | float:
    """Print 3.0 as 3."""
    return int(f) if f.is_integer() and abs(f) < 2**53 else f


def table(rows: Iterable[dict[str, Any]], header: list[str] | None = None) -> dict[str, Any]:
    """Row count and per-column statistics of an iterable of row dicts."""
    cols: dict[str, Column] = {}
    for h in header or []:
        cols.setdefault(h, Column(h))
    n = 0
    for row in rows:
        n += 1
        for k in cols.keys() - row.keys():
            cols[k].add(None)
        for k, v in row.items():
            if k not in cols:
                cols[k] = Column(k)
                cols[k].nulls = n - 1  # absent from every earlier row
            cols[k].add(v)
    return {"rows": n, "columns": [c.result() for c in cols.values()]}


def analyze_json(data: bytes) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise AnalysisError(f"invalid JSON: {e}") from None
    rows = doc
    path = ""
    if isinstance(doc, dict):
        # A common wrapper: {"rows": [...]} or {"data": [...]}.
        lists = [(k, v) for k, v in doc.items() if isinstance(v, list) and v and all(isinstance(x, dict) for x in v)]
        if len(lists) == 1:
            path, rows = lists[0]
    if isinstance(rows, list) and all(isinstance(x, dict) for x in rows):
        r = {"kind": "json-rows", **table(rows)}
        if path:
            r["path"] = path
        return r
    r = {"kind": "json", "type": type(doc).__name__}
    if isinstance(doc, dict):
        r["keys"] = list(doc)[:50]
    elif isinstance(doc, list):
        r["length"] = len(doc)
    return r


def analyze_csv(data: bytes) -> dict[str, Any]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise AnalysisError(f"CSV is not UTF-8: {e}") from None
    try:
        dialect: Any = csv.Sniffer().sniff(text[:65536], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(io.StringIO(text, newline=""), dialect)
    try:
        header = next(reader)
    except StopIteration:
        raise AnalysisError("empty CSV") from None
    except csv.Error as e:
        raise AnalysisError(f"invalid CSV: {e}") from None
    header = [h or f"column_{i + 1}" for i, h in enumerate(header)]

    def rows() -> Iterator[dict[str, Any]]:
        for rec in reader:
            if not rec:
                continue
            row = dict(zip(header, rec))
            for i in range(len(header), len(rec)):  # ragged rows keep their extra cells
                row[f"column_{i + 1}"] = rec[i]
            yield row

    try:
        return {"kind": "csv", "delimiter": getattr(dialect, "delimiter", ","), **table(rows(), header)}
    except csv.Error as e:
        raise AnalysisError(f"invalid CSV: {e}") from None


PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PNG_COLOR_TYPES = {0: "grayscale", 2: "rgb", 3: "palette", 4: "grayscale+alpha", 6: "rgba"}


def analyze_png(data: bytes) -> dict[str, Any]:
    """Read a PNG's chunk structure and IHDR header without decoding pixels."""
    if not data.startswith(PNG_SIGNATURE):
        raise AnalysisError("not a PNG: bad signature")
    pos = len(PNG_SIGNATURE)
    chunks: collections.Counter[str] = collections.Counter()
    ihdr: dict[str, Any] | None = None
    idat = 0
    ended = False
    while pos < len(data):
        if pos + 8 > len(data):
            raise AnalysisError(f"truncated PNG chunk header at byte {pos}")
        length, ctype = struct.unpack(">I4s", data[pos : pos + 8])
        end = pos + 12 + length
        if length > 0x7FFFFFFF or end > len(data):
            raise AnalysisError(f"truncated PNG chunk at byte {pos}")
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : end])
        if zlib.crc32(ctype + body) != crc:
            raise AnalysisError(f"PNG chunk {ctype!r} at byte {pos}: CRC mismatch")
        name = ctype.decode("latin-1")
        if not chunks and name != "IHDR":
            raise AnalysisError("PNG does not start with IHDR")
        chunks[name] += 1
        if name == "IHDR":
            if length != 13:
                raise AnalysisError("PNG IHDR is not 13 bytes")
            w, h, depth, color, comp, filt, interlace = struct.unpack(">IIBBBBB", body)
            if w == 0 or h == 0:
                raise AnalysisError("PNG has a zero dimension")
            if color not in PNG_COLOR_TYPES:
                raise AnalysisError(f"PNG colour type {color} is invalid")
            ihdr = {"width": w, "height": h, "bit_depth": depth, "color_type": PNG_COLOR_TYPES[color],
                    "interlaced": interlace == 1}
        elif name == "IDAT":
            idat += length
        pos = end
        if name == "IEND":
            ended = True
            break
    if ihdr is None:
        raise AnalysisError("PNG has no IHDR")
    r: dict[str, Any] = {"kind": "png", **ihdr, "chunks": dict(chunks), "image_data_bytes": idat, "complete": ended}
    if pos < len(data):
        r["trailing_bytes"] = len(data) - pos
    return r


def analyze_text(data: bytes) -> dict[str, Any]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"kind": "binary"}
    lines = text.splitlines()
    return {"kind": "text", "lines": len(lines), "words": len(text.split()),
            "longest_line": max((len(x) for x in lines), default=0)}


def kind_of(data: bytes, mime: str) -> str:
    mime = mime.split(";")[0].strip().lower()
    if data.startswith(PNG_SIGNATURE) or mime == "image/png":
        return "png"
    if mime in ("text/csv", "application/csv"):
        return "csv"
    if mime == "application/json" or mime.endswith("+json"):
        return "json"
    head = data[:1024].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head[:1] in (b"[", b"{"):
        return "json"
    first = head.split(b"\n", 1)[0]
    if mime in ("", "text/plain", "application/octet-stream") and first.count(b",") >= 2 and b"\n" in head:
        return "csv"
    return "text"


def analyze_bytes(data: bytes, mime: str = "") -> dict[str, Any]:
    """Analyze data; mime is a hint. Never raises on bad input: errors become a field."""
    base = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    kind = kind_of(data, mime)
    analyzer = {"png": analyze_png, "csv": analyze_csv, "json": analyze_json}.get(kind, analyze_text)
    try:
        return {**base, **analyzer(data)}
    except AnalysisError as e:
        # Say what was wrong, then describe the bytes as plain data.
        return {**base, **analyze_text(data), "error": str(e), "claimed": kind}


# --------------------------------------------------------------------------
# Output


def render(r: dict[str, Any]) -> str:
    out = []
    src = r.get("source")
    if src:
        out.append(f"source: {src}")
    if r.get("name"):
        out.append(f"name: {r['name']}")
    out.append(f"kind: {r['kind']}" + (f" (claimed {r['claimed']}: {r['error']})" if "error" in r else ""))
    out.append(f"bytes: {r['bytes']}  sha256: {r['sha256']}")
    if r["kind"] in ("json-rows", "csv"):
        out.append(f"rows: {r['rows']}  columns: {len(r['columns'])}")
        out.append(f"{'column':<20} {'type':<8} {'count':>8} {'nulls':>6} {'distinct':>9} {'min':>12} {'max':>12} {'mean':>12}  top")
        for c in r["columns"]:
            def num(k: str) -> str:
                return f"{c[k]:>12.6g}" if k in c else f"{'':>12}"
            top = c.get("top")
            top_s = f"{str(top['value'])[:24]!s} ({top['count']})" if top else ""
            out.append(f"{c['name'][:20]:<20} {c['type']:<8} {c['count']:>8} {c['nulls']:>6} {c['distinct']:>9}"
                       f" {num('min')} {num('max')} {num('mean')}  {top_s}")
    elif r["kind"] == "png":
        out.append(f"image: {r['width']}x{r['height']} {r['color_type']} {r['bit_depth']}-bit"
                   + (" interlaced" if r["interlaced"] else ""))
        out.append("chunks: " + ", ".join(f"{k}×{v}" for k, v in r["chunks"].items()))
    elif r["kind"] == "text":
        out.append(f"lines: {r['lines']}  words: {r['words']}  longest line: {r['longest_line']}")
    elif r["kind"] == "json":
        out.append(f"JSON {r['type']}" + (f", keys {r['keys']}" if "keys" in r else "")
                   + (f", length {r['length']}" if "length" in r else ""))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Fetch a Spillway httpUrl and analyze it.",
                                 epilog="Exit: 3 expired, 4 denied, 5 not found, 6 integrity error.")
    ap.add_argument("input", nargs="?", default="-", help="httpUrl, a JSON file holding resource_link(s), or - for stdin")
    ap.add_argument("--json", action="store_true", help="print the analysis as JSON")
    ap.add_argument("--timeout", type=float, default=30, help="seconds per HTTP attempt (default 30)")
    args = ap.parse_args(argv)

    try:
        if args.input == "-":
            text = sys.stdin.read()
        elif args.input.startswith(("http://", "https://")):
            text = args.input
        else:
            text = pathlib.Path(args.input).read_text(encoding="utf-8")
        links = parse_input(text)
    except (AnalysisError, OSError) as e:
        print(f"analyze: {e}", file=sys.stderr)
        return EXIT_USAGE

    try:
        sdk = load_sdk()
    except ImportError as e:
        print(f"analyze: {e}", file=sys.stderr)
        return EXIT_ERROR

    results = []
    for link in links:
        try:
            data = fetch_link(sdk, link, args.timeout)
        except Exception as e:  # the SDK's typed errors carry the server's code
            name = type(e).__name__
            code = getattr(e, "code", None)
            print(f"analyze: {redact(link['httpUrl'])}: {name}" + (f" [{code}]" if code else "") + f": {e}",
                  file=sys.stderr)
            return EXIT_BY_ERROR.get(name, EXIT_ERROR)
        r = {"source": redact(link["httpUrl"]), **analyze_bytes(data, str(link.get("mimeType") or ""))}
        if link.get("name"):
            r["name"] = link["name"]
        results.append(r)

    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results, indent=2))
    else:
        print("\n\n".join(render(r) for r in results))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
