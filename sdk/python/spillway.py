"""Fetch Spillway links (``httpUrl``) from sandboxed code, with nothing but the standard library.

Copy this one file next to your code, or ``pip install`` its folder. Then::

    import spillway
    data = spillway.fetch(link["httpUrl"], sha256=link["_meta"]["dev.spillway/sha256"])
    spillway.fetch(url, "orders.json")            # streams to a file instead
    rows = spillway.load_json(url)

``fetch`` streams, checks the size and the SHA-256, resumes with an HTTP Range request when the
connection breaks, and raises ``LinkExpired``, ``AccessDenied``, ``NotFound`` or
``IntegrityError`` (each carrying the server's error ``code``). From a shell::

    python3 -m spillway URL [-o FILE] [--sha256 HEX]
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import http.client
import io
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request
from typing import Any, BinaryIO, Callable, Optional, Union

__all__ = [
    "fetch", "open_text", "load_json", "SpillwayError", "LinkExpired", "AccessDenied",
    "NotFound", "IntegrityError", "Unavailable",
]
__version__ = "0.1.0"

SHA256_META = "dev.spillway/sha256"
_CHUNK = 256 << 10


class SpillwayError(Exception):
    """A fetch failed. ``code`` is the server's error code (e.g. "expired"), ``status`` the HTTP status."""

    def __init__(self, message: str, code: str = "", status: int = 0):
        super().__init__(message)
        self.code = code
        self.status = status


class LinkExpired(SpillwayError):
    """The link (or its artifact) has expired: ask for a fresh link."""


class AccessDenied(SpillwayError):
    """The link is not valid for this request, or the policy denies it."""


class NotFound(SpillwayError):
    """The artifact does not exist (any more)."""


class IntegrityError(SpillwayError):
    """The bytes received do not match the expected size or SHA-256."""


class Unavailable(SpillwayError):
    """The server or its storage is unavailable; retrying later may help."""


_BY_STATUS = {403: AccessDenied, 401: AccessDenied, 404: NotFound, 410: LinkExpired, 503: Unavailable}


def _parse_time(t: Any) -> Optional[float]:
    if t is None:
        return None
    if isinstance(t, (int, float)):
        return float(t)
    if isinstance(t, _dt.datetime):
        return t.timestamp()
    s = str(t).strip()
    if s.endswith("Z"):
        s = s[:-1] + "+00:00"
    return _dt.datetime.fromisoformat(s).timestamp()


def _error(status: int, body: bytes) -> SpillwayError:
    code, message = "", ""
    try:
        doc = json.loads(body.decode("utf-8"))
        code, message = str(doc.get("code", "")), str(doc.get("message", ""))
    except (ValueError, UnicodeDecodeError, AttributeError):
        pass
    cls = _BY_STATUS.get(status, SpillwayError)
    return cls(f"HTTP {status}: {message or code or 'request failed'}", code=code, status=status)


def fetch(
    url: str,
    path: Union[str, os.PathLike, None] = None,
    *,
    expires_at: Any = None,
    sha256: Optional[str] = None,
    size: Optional[int] = None,
    timeout: float = 60.0,
    retries: int = 5,
    progress: Optional[Callable[[int, Optional[int]], None]] = None,
    headers: Optional[dict] = None,
) -> Any:
    """Fetch ``url``; return its bytes, or write them to ``path`` and return the path.

    ``expires_at`` (RFC 3339 string, datetime or epoch seconds) refuses an expired link without a
    request. ``sha256`` and ``size`` are checked at the end; without ``sha256`` the server's ETag
    (the artifact's SHA-256) is used. A broken connection is resumed with Range up to ``retries``
    times. ``progress(done, total)`` is called as bytes arrive.
    """
    exp = _parse_time(expires_at)
    if exp is not None and time.time() >= exp:
        raise LinkExpired(f"link expired at {expires_at}", code="expired")
    if path is None:
        sink: BinaryIO = io.BytesIO()
    else:
        part = os.fspath(path) + ".part"
        sink = open(part, "wb")
    try:
        total = _download(url, sink, sha256, size, timeout, retries, progress, headers or {})
        if path is None:
            return sink.getvalue()  # type: ignore[attr-defined]
        sink.close()
        os.replace(part, path)
        return path
    except BaseException:
        if path is not None:
            sink.close()
            try:
                os.remove(part)
            except OSError:
                pass
        raise


def _download(url, sink, want_sha, want_size, timeout, retries, progress, extra) -> int:
    h = hashlib.sha256()
    done, total, etag = 0, None, None
    attempt = 0
    while True:
        req = urllib.request.Request(url, headers=dict(extra))
        if done > 0:
            req.add_header("Range", f"bytes={done}-")
            if etag:
                req.add_header("If-Range", etag)
        try:
            resp = urllib.request.urlopen(req, timeout=timeout)
        except urllib.error.HTTPError as e:
            body = e.read(64 << 10)
            if e.code in (500, 502, 503, 504) and attempt < retries:
                attempt += 1
                time.sleep(min(float(e.headers.get("Retry-After") or 0) or 0.2 * 2 ** attempt, 10))
                continue
            raise _error(e.code, body) from None
        except (urllib.error.URLError, socket.timeout, ConnectionError) as e:
            if attempt < retries:
                attempt += 1
                time.sleep(min(0.2 * 2 ** attempt, 10))
                continue
            raise Unavailable(f"cannot reach {url.split('?')[0]}: {e}") from None
        with resp:
            if resp.status == 200 and done > 0:  # the server restarted from zero
                sink.seek(0)
                sink.truncate()
                h, done = hashlib.sha256(), 0
            elif resp.status == 206:
                start = int(resp.headers.get("Content-Range", "bytes 0-").split()[1].split("-")[0])
                if start != done:
                    raise IntegrityError(f"resumed at byte {start}, expected {done}", code="range")
            etag = resp.headers.get("ETag") or etag
            length = resp.headers.get("Content-Length")
            if length is not None:
                total = done + int(length)
            try:
                while True:
                    chunk = resp.read(_CHUNK)
                    if not chunk:
                        break
                    sink.write(chunk)
                    h.update(chunk)
                    done += len(chunk)
                    if progress:
                        progress(done, total)
            except (http.client.IncompleteRead, ConnectionError, socket.timeout, OSError) as e:
                if attempt < retries:
                    attempt += 1
                    time.sleep(min(0.1 * 2 ** attempt, 5))
                    continue
                raise Unavailable(f"connection broke at byte {done}: {e}") from None
        if total is not None and done < total:
            if attempt < retries:
                attempt += 1
                continue
            raise Unavailable(f"connection broke at byte {done} of {total}")
        break
    if want_size is not None and done != want_size:
        raise IntegrityError(f"got {done} bytes, expected {want_size}", code="size")
    got = h.hexdigest()
    expect = (want_sha or (etag or "").strip('W/"')).lower()
    if expect and len(expect) == 64 and got != expect:
        raise IntegrityError(f"sha256 {got}, expected {expect}", code="sha256")
    return done


def open_text(url: str, encoding: str = "utf-8", **kw: Any) -> str:
    """Fetch ``url`` and decode it as text."""
    return fetch(url, **kw).decode(encoding)


def load_json(url: str, **kw: Any) -> Any:
    """Fetch ``url`` and parse it as JSON."""
    return json.loads(fetch(url, **kw))


def _bar(out):
    start = time.time()

    def show(done: int, total: Optional[int]) -> None:
        rate = done / max(time.time() - start, 1e-6) / 1e6
        if total:
            n = int(30 * done / total)
            out.write(f"\r[{'#' * n}{'.' * (30 - n)}] {done / 1e6:8.1f}/{total / 1e6:.1f} MB {rate:6.1f} MB/s")
        else:
            out.write(f"\r{done / 1e6:8.1f} MB {rate:6.1f} MB/s")
        out.flush()

    return show


def main(argv: Optional[list] = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python3 -m spillway", description="Fetch a Spillway httpUrl.")
    ap.add_argument("url", help="the httpUrl, or a resource_link JSON (a file name or - for stdin)")
    ap.add_argument("-o", "--output", help="write to this file (default: stdout)")
    ap.add_argument("--sha256", help="expected SHA-256 (default: from the link or the ETag)")
    ap.add_argument("--expires-at", help="the link's httpUrlExpiresAt")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    a = ap.parse_args(argv)
    url, sha, exp, size = a.url, a.sha256, a.expires_at, None
    if not url.startswith(("http://", "https://")):
        text = sys.stdin.read() if url == "-" else open(url, encoding="utf-8").read()
        link = json.loads(text)
        url, exp = link["httpUrl"], exp or link.get("httpUrlExpiresAt")
        sha = sha or (link.get("_meta") or {}).get(SHA256_META)
        size = link.get("size")
    show = None if a.quiet or not sys.stderr.isatty() else _bar(sys.stderr)
    try:
        if a.output:
            fetch(url, a.output, sha256=sha, expires_at=exp, size=size, progress=show)
        else:
            sys.stdout.buffer.write(fetch(url, sha256=sha, expires_at=exp, size=size, progress=show))
    except SpillwayError as e:
        if show:
            sys.stderr.write("\n")
        sys.stderr.write(f"spillway: {type(e).__name__}: {e}\n")
        return {LinkExpired: 3, AccessDenied: 4, NotFound: 5, IntegrityError: 6}.get(type(e), 1)
    if show:
        sys.stderr.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
