"""Fetch Spillway links (``httpUrl``) from sandboxed code, with nothing but the standard library.

Copy this one file next to your code, or ``pip install`` its folder. Then::

    import spillway
    data = spillway.fetch(link)                   # the resource_link: its URL, SHA-256, size, expiry
    data = spillway.fetch(link["httpUrl"], sha256=link["_meta"]["dev.spillway/sha256"])
    spillway.fetch(link, "orders.json")           # streams to a file instead
    rows = spillway.load_json(link)

``fetch`` streams, checks the size and the SHA-256, resumes with an HTTP Range request when the
connection breaks, waits as told by ``Retry-After`` when the service is unavailable, and raises
``LinkExpired``, ``AccessDenied``, ``NotFound`` or ``IntegrityError`` (each carrying the server's
error ``code``).

Which SHA-256 is checked: the link's (``fetch(link)``) or the ``sha256=`` given, which must be 64
hex digits (anything else raises ``BadDigest`` before any request). Given a bare URL and no
digest, the ETag stands in when it is a SHA-256, as Spillway's own answers are; after a redirect to
storage (``--redirect``) the ETag is the store's MD5 and no checksum is checked at all. Pass
``require_sha256=True`` to refuse such a fetch (``NoDigest``). An ``Authorization`` header given in
``headers`` is sent to the link's origin only, never to a redirect's other scheme, host or port.
From a shell::

    python3 -m spillway URL|LINK.json [-o FILE] [--sha256 HEX] [--require-sha256]
"""

from __future__ import annotations

import datetime as _dt
import email.utils
import hashlib
import http.client
import io
import json
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, BinaryIO, Callable, Optional, Union

__all__ = [
    "fetch", "open_text", "load_json", "SpillwayError", "LinkExpired", "AccessDenied",
    "NotFound", "IntegrityError", "Unavailable", "BadDigest", "NoDigest",
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


class BadDigest(SpillwayError, ValueError):
    """The expected SHA-256 is not 64 hex digits; raised before any request."""


class NoDigest(SpillwayError, ValueError):
    """``require_sha256`` is set (or a link is given) but no expected SHA-256 is known."""


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


def _digest(s: str) -> str:
    """The lower-case form of an expected SHA-256; anything but 64 hex digits raises BadDigest."""
    if not isinstance(s, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", s):
        shown = repr(s)[:80]
        raise BadDigest(f"expected sha256 {shown} is not 64 hex digits", code="digest")
    return s.lower()


def _etag_digest(etag: Optional[str]) -> Optional[str]:
    """The SHA-256 a strong ETag carries, as Spillway sends it; None for any other ETag
    (a weak one, or a storage service's MD5 after a redirect)."""
    m = re.fullmatch(r'"([0-9a-fA-F]{64})"', etag or "")
    return m.group(1).lower() if m else None


def _retry_after(value: Optional[str], limit: float, now: Optional[float] = None) -> Optional[float]:
    """Seconds to wait for a Retry-After value, delta-seconds or HTTP-date, within [0, limit];
    None when absent or unparsable."""
    v = (value or "").strip()
    if not v:
        return None
    if re.fullmatch(r"[0-9]+", v):
        return min(float(int(v)), limit)
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # asctime carries no zone; HTTP dates are GMT
        when = when.replace(tzinfo=_dt.timezone.utc)
    wait = when.timestamp() - (time.time() if now is None else now)
    return min(max(wait, 0.0), limit)


def _origin(url: str):
    """(scheme, host, port) with the default port made explicit; None when the URL is malformed."""
    p = urllib.parse.urlsplit(url)
    scheme = p.scheme.lower()
    try:
        port = p.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:  # a port that is not a number, or out of range
        return None
    return scheme, (p.hostname or "").lower(), port


class _SameOriginRedirect(urllib.request.HTTPRedirectHandler):
    """Follows redirects like urllib, but drops credentials on the way to another origin (scheme,
    host, port): a link's token must not reach the storage host it redirects to."""

    _SECRET = ("authorization", "proxy-authorization", "cookie")

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        to = None if new is None else _origin(new.full_url)
        if new is not None and (to is None or to != _origin(req.full_url)):
            for k in [k for k in new.headers if k.lower() in self._SECRET]:
                del new.headers[k]
        return new


_OPENER = urllib.request.build_opener(_SameOriginRedirect)

_CONTENT_RANGE = re.compile(r"bytes ([0-9]+)-([0-9]+)/([0-9]+|\*)")


def _error(status: int, body: bytes) -> SpillwayError:
    code, message = "", ""
    try:
        doc = json.loads(body.decode("utf-8"))
        code, message = str(doc.get("code", "")), str(doc.get("message", ""))
    except (ValueError, UnicodeDecodeError, AttributeError):
        pass
    cls = _BY_STATUS.get(status, SpillwayError)
    return cls(f"HTTP {status}: {message or code or 'request failed'}", code=code, status=status)


def _from_link(link: dict, sha256: Optional[str], expires_at: Any, size: Optional[int]):
    """The URL of a resource_link and the checks it carries; explicit arguments win."""
    if not isinstance(link.get("httpUrl"), str):
        raise ValueError("a resource_link needs its httpUrl")
    meta = link.get("_meta") if isinstance(link.get("_meta"), dict) else {}
    if sha256 is None:
        sha256 = meta.get(SHA256_META)
    if expires_at is None:
        expires_at = link.get("httpUrlExpiresAt")
    if size is None and isinstance(link.get("size"), int):
        size = link["size"]
    return link["httpUrl"], sha256, expires_at, size


def fetch(
    url: Union[str, dict],
    path: Union[str, os.PathLike, None] = None,
    *,
    expires_at: Any = None,
    sha256: Optional[str] = None,
    require_sha256: Optional[bool] = None,
    size: Optional[int] = None,
    timeout: float = 60.0,
    retries: int = 5,
    max_retry_wait: float = 10.0,
    progress: Optional[Callable[[int, Optional[int]], None]] = None,
    headers: Optional[dict] = None,
) -> Any:
    """Fetch ``url``; return its bytes, or write them to ``path`` and return the path.

    ``url`` is an ``httpUrl`` or a whole resource_link (a dict): then its SHA-256, size and expiry
    are checked and ``require_sha256`` defaults to True. ``expires_at`` (RFC 3339 string, datetime
    or epoch seconds) refuses an expired link without a request. ``sha256`` (64 hex digits, else
    ``BadDigest`` before any request) and ``size`` are checked at the end; without ``sha256`` the
    ETag is used when it is a SHA-256, else nothing is checked unless ``require_sha256`` (then
    ``NoDigest`` before any request). A broken connection is resumed with Range, and a 5xx answer
    retried after its ``Retry-After`` (at most ``max_retry_wait`` seconds), up to ``retries``
    times. ``progress(done, total)`` is called as bytes arrive. ``headers`` (say, the token as
    ``Authorization: Bearer``) go to the link's origin only.
    """
    if isinstance(url, dict):
        url, sha256, expires_at, size = _from_link(url, sha256, expires_at, size)
        if require_sha256 is None:
            require_sha256 = True
    if sha256 is not None and sha256 != "":
        sha256 = _digest(sha256)
    elif require_sha256:
        raise NoDigest(f"no expected sha256: pass the link's _meta[{SHA256_META!r}]", code="digest")
    exp = _parse_time(expires_at)
    if exp is not None and time.time() >= exp:
        raise LinkExpired(f"link expired at {expires_at}", code="expired")
    if path is None:
        sink: BinaryIO = io.BytesIO()
    else:
        part = os.fspath(path) + ".part"
        sink = open(part, "wb")
    try:
        total = _download(url, sink, sha256, size, timeout, retries, max_retry_wait, progress, headers or {})
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


def _download(url, sink, want_sha, want_size, timeout, retries, max_wait, progress, extra) -> int:
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
            resp = _OPENER.open(req, timeout=timeout)
        except urllib.error.HTTPError as e:
            body = e.read(64 << 10)
            if e.code in (500, 502, 503, 504) and attempt < retries:
                attempt += 1
                wait = _retry_after(e.headers.get("Retry-After"), max_wait)
                time.sleep(min(0.2 * 2 ** attempt, max_wait) if wait is None else wait)
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
                m = _CONTENT_RANGE.fullmatch(resp.headers.get("Content-Range") or "")
                start = int(m.group(1)) if m else -1
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
    expect = want_sha or _etag_digest(etag)  # want_sha was checked by fetch: 64 lower-case hex
    if expect and got != expect:
        raise IntegrityError(f"sha256 {got}, expected {expect}", code="sha256")
    return done


def open_text(url: Union[str, dict], encoding: str = "utf-8", **kw: Any) -> str:
    """Fetch ``url`` (or a resource_link) and decode it as text."""
    return fetch(url, **kw).decode(encoding)


def load_json(url: Union[str, dict], **kw: Any) -> Any:
    """Fetch ``url`` (or a resource_link) and parse it as JSON."""
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
    ap.add_argument("--sha256", help="expected SHA-256 (default: the link's, else the ETag's if a SHA-256)")
    ap.add_argument("--require-sha256", action="store_true", default=None,
                    help="refuse to fetch without an expected SHA-256 (the default for a link)")
    ap.add_argument("--expires-at", help="the link's httpUrlExpiresAt")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    a = ap.parse_args(argv)
    target: Union[str, dict] = a.url
    if not a.url.startswith(("http://", "https://")):
        target = json.loads(sys.stdin.read() if a.url == "-" else open(a.url, encoding="utf-8").read())
    show = None if a.quiet or not sys.stderr.isatty() else _bar(sys.stderr)
    kw = dict(sha256=a.sha256, require_sha256=a.require_sha256, expires_at=a.expires_at, progress=show)
    try:
        if a.output:
            fetch(target, a.output, **kw)
        else:
            sys.stdout.buffer.write(fetch(target, **kw))
    except SpillwayError as e:
        if show:
            sys.stderr.write("\n")
        sys.stderr.write(f"spillway: {type(e).__name__}: {e}\n")
        return {LinkExpired: 3, AccessDenied: 4, NotFound: 5, IntegrityError: 6, BadDigest: 2, NoDigest: 2}.get(type(e), 1)
    if show:
        sys.stderr.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
