"""Fetch Spillway links (``httpUrl``) from sandboxed code, with nothing but the standard library.

Copy this one file next to your code, or ``pip install`` its folder. Then::

    import spillway
    data = spillway.fetch(link)                   # the resource_link: its URL, SHA-256, size, expiry
    data = spillway.fetch(link["httpUrl"], sha256=link["_meta"]["dev.spillway/sha256"])
    spillway.fetch(link, "orders.json")           # streams to a file instead
    spillway.fetch(link, sys.stdout.buffer)       # or to any binary stream, as bytes arrive
    rows = spillway.load_json(link)

``fetch`` streams, checks the size and the SHA-256, resumes with an HTTP Range request when the
connection breaks, waits as told by ``Retry-After`` when the service is unavailable, and raises
``LinkExpired``, ``AccessDenied``, ``NotFound`` or ``IntegrityError`` (each carrying the server's
error ``code``). A file is written to ``NAME.part``, created afresh (never opened through a symlink
or another file's hard link), and renamed when complete; a 206 is taken only for the range asked
and the range its ``Content-Range`` names.

Which SHA-256 is checked: the link's (``fetch(link)``) or the ``sha256=`` given, which must be 64
hex digits (anything else raises ``BadDigest`` before any request). Given a bare URL and no
digest, the ETag stands in when it is a SHA-256, as Spillway's own answers are; after a redirect to
storage (``--redirect``) the ETag is the store's MD5 and no checksum is checked at all. Pass
``require_sha256=True`` to refuse such a fetch (``NoDigest``). An ``Authorization`` header given in
``headers`` is sent to the link's origin only, never to a redirect's other scheme, host or port.
From a shell::

    python3 -m spillway URL|LINK.json [-o FILE] [--sha256 HEX] [--require-sha256]

Without ``-o`` the bytes go to stdout as they arrive; a non-zero exit status means that what
was written must be thrown away.
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
import stat
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
# A partial file is created, never opened: O_EXCL refuses whatever already has its name (a
# symlink included, dangling or not), O_NOFOLLOW where the platform has it.
_PART_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))


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


def _create_part(part: str) -> int:
    """Create the partial file ``part`` exclusively and return its descriptor. A regular file
    of that name (an earlier fetch's, or a hard link to another file) is unlinked first, never
    written through; anything else (a symlink, a directory, a FIFO) is refused."""
    for _ in range(2):
        try:
            return os.open(part, _PART_FLAGS, 0o666)
        except FileExistsError:
            pass
        st = os.lstat(part)
        if not stat.S_ISREG(st.st_mode):
            break
        os.remove(part)
    raise SpillwayError(f"{part} exists and is not a regular file: not writing through it", code="path")


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
    path: Union[str, os.PathLike, BinaryIO, None] = None,
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

    ``path`` may also be a writable binary stream (``sys.stdout.buffer``, a socket file): the
    bytes are written to it as they arrive and ``path`` is returned, so memory stays bounded
    whatever the size. The checks run as the bytes pass: on an error, what was written already
    must be thrown away. A file name is written as ``NAME.part`` first, created exclusively (a
    symlink or other non-regular file of that name raises ``SpillwayError`` with code "path"),
    and renamed to ``NAME`` once checked.

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
    args = (sha256, size, timeout, retries, max_retry_wait, progress, headers or {})
    if path is None:
        buf = io.BytesIO()
        _download(url, buf, *args)
        return buf.getvalue()
    if hasattr(path, "write"):
        _download(url, path, *args)  # type: ignore[arg-type]
        return path
    name = os.fspath(path)
    part = name + ".part"
    fd = _create_part(part)
    try:
        with os.fdopen(fd, "wb") as sink:
            _download(url, sink, *args)
        os.replace(part, name)
        return path
    except BaseException:
        try:
            os.remove(part)  # ours: created above; if swapped since, only the new name goes
        except OSError:
            pass
        raise


def _download(url, sink, want_sha, want_size, timeout, retries, max_wait, progress, extra) -> int:
    """Write the bytes at url to sink, which is only ever appended to (it may be a stream), and
    check them; returns their number."""
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
            start, stop, total = _answer_range(resp, done, total)
            etag = resp.headers.get("ETag") or etag
            # A 200 after bytes were written starts over: the sink may be a stream that cannot
            # be rewound, so the repeated prefix is hashed, compared with what was written, and
            # skipped; only then does the new response's hash replace the old.
            skip, again = done - start, hashlib.sha256()
            try:
                while True:
                    chunk = resp.read(_CHUNK)
                    if not chunk:
                        break
                    if skip > 0:
                        again.update(chunk[:skip])
                        chunk, skip = chunk[skip:], skip - len(chunk[:skip])
                        if skip == 0:
                            if again.digest() != h.digest():
                                raise IntegrityError("the artifact changed while it was fetched", code="changed")
                            h = again
                    if not chunk:
                        continue
                    if stop is not None and done + len(chunk) > stop:
                        raise IntegrityError(f"more bytes than the {stop} announced", code="size")
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
            if stop is not None and done == stop and resp.status == 206:
                continue  # a shorter range than asked, delivered whole: ask for the rest
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


def _answer_range(resp, done: int, total: Optional[int]):
    """(start, stop, total) of a 200 or 206 answering a request for bytes ``done``- (the whole
    when done is 0, sent without Range): where its body starts, the offset it must not pass
    (None: unknown), and the artifact's length (None: unknown). A 206 to a request without
    Range, a Content-Range other than the range asked, or one that disagrees with the body's
    length or the length known so far, raises IntegrityError (code "range")."""
    length = resp.headers.get("Content-Length")
    length = int(length) if length is not None and length.isdigit() else None
    if resp.status != 206:
        if done > 0 and None not in (length, total) and length != total:
            raise IntegrityError(f"the artifact changed size while it was fetched: {total}, now {length}", code="changed")
        return 0, length, length if length is not None else total
    cr = resp.headers.get("Content-Range") or ""
    m = _CONTENT_RANGE.fullmatch(cr)
    if done == 0:
        raise IntegrityError(f"a 206 ({cr}) to a request for the whole artifact", code="range")
    start, end = (int(m.group(1)), int(m.group(2))) if m else (-1, -1)
    size = None if not m or m.group(3) == "*" else int(m.group(3))
    if (start != done or end < start or (size is not None and end >= size)
            or (length is not None and length != end - start + 1)
            or (size is not None and total is not None and size != total)):
        raise IntegrityError(f"asked for bytes {done}- of {total}, got {cr!r} with {length} bytes", code="range")
    return start, end + 1, size if size is not None else total


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
            fetch(target, sys.stdout.buffer, **kw)  # as bytes arrive: the artifact may be large
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
