package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/spillway-dev/spillway/artifact/httpsafe"
	"github.com/spillway-dev/spillway/artifact/token"
)

// HandlerOptions configure the fetch endpoint. The zero value serves bytes
// itself; every fetch is decided by Service.Authorize (Service.Fetch nil
// denies all).
type HandlerOptions struct {
	// Logger receives one line per request (never the token). Nil: slog.Default().
	Logger *slog.Logger
	// Redirect lets an allowed GET be answered with a 302 to a storage URL
	// presigned for RedirectTTL, when the store is a Presigner and the fetch
	// decision allows redirect (policy.FetchDecision.Redirect). The storage
	// URL gives up the link's client-address binding and revocation.
	Redirect    bool
	RedirectTTL time.Duration // default and maximum 60s
	// WriteStallTimeout cuts a response whose client stops reading: each
	// write of at most 64 KiB of body must complete within it (each 64 KiB
	// of a local file sent by sendfile on Linux, within seven eighths of
	// it; each 256 KiB of a store's connection spliced, see splice), so a
	// slow reader that keeps reading is never cut. (The kernel
	// wakes a blocked writer once about a third of the socket's send
	// buffer, at most 4 MiB on Linux, has drained: the client must take
	// that much within it.)
	// [30s; <0: none]
	WriteStallTimeout time.Duration
	// Trace, when set, is called as each fetch of artifact id begins: it
	// returns the request to serve (its context may carry a span, under
	// which the fetch decision is taken) and a function called once the
	// fetch is answered, with its status, the body bytes written and the
	// error it failed with (nil for none). Nil: fetches are not traced.
	// It must not record r's query or Authorization (the token).
	Trace func(r *http.Request, id string) (*http.Request, func(status int, bytes int64, err error))
}

// Handler serves artifact bytes to holders of a valid link: GET and HEAD on
// FetchPath with the token in the `t` query parameter or an
// `Authorization: Bearer` header. Safe for concurrent use.
type Handler struct {
	svc *Service
	o   HandlerOptions
	log *slog.Logger
}

// NewHandler returns the fetch endpoint for svc.
func NewHandler(svc *Service, o HandlerOptions) *Handler {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RedirectTTL <= 0 || o.RedirectTTL > time.Minute {
		o.RedirectTTL = time.Minute
	}
	if o.WriteStallTimeout == 0 {
		o.WriteStallTimeout = 30 * time.Second
	}
	return &Handler{svc: svc, o: o, log: o.Logger}
}

// Register mounts the handler's routes on r.
func (h *Handler) Register(r *mux.Router) {
	r.MatcherFunc(fetchRoute).Methods(http.MethodGet, http.MethodHead).Handler(h)
	r.MatcherFunc(fetchRoute).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, httpsafe.NewError(http.StatusMethodNotAllowed, "method_not_allowed", "only GET and HEAD"))
	}))
}

// fetchRoute matches FetchPath, /a/ and one path segment, the id (which
// serve checks), without the regular expressions mux runs for a pattern:
// two per fetch, 4% of a small fetch's CPU in a profile.
func fetchRoute(r *http.Request, _ *mux.RouteMatch) bool {
	id, ok := strings.CutPrefix(r.URL.Path, "/a/")
	return ok && id != "" && !strings.Contains(id, "/")
}

// ServeHTTP serves one fetch. The artifact id comes from the mux route
// variable "id", or else from the last path segment.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := mux.Vars(r)["id"]
	if id == "" {
		id = r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	}
	httpsafe.SetSafetyHeaders(w.Header())
	cw := &countingWriter{ResponseWriter: w}
	var traced func(int, int64, error)
	if h.o.Trace != nil {
		r, traced = h.o.Trace(r, id)
	}
	n := h.svc.fetchNote()
	claims, err := h.serve(cw, r, id, n)
	if err != nil {
		writeError(cw, err)
	}
	took := time.Since(start)
	h.svc.Metrics.fetched(cw.status, cw.n, took)
	h.logRequest(r, id, claims.ID, cw, took, err)
	h.svc.auditServed(r, id, claims.ID, cw.status, cw.n, n, err)
	if traced != nil {
		traced(cw.status, cw.n, err)
	}
}

// serve answers a fetch of id; n, when auditing, notes the artifact and
// the fetch decision's id for the audit line.
func (h *Handler) serve(w *countingWriter, r *http.Request, id string, n *fetchNote) (token.Claims, error) {
	tok, ok := tokenOf(r)
	if !ok || !ValidID(id) {
		return token.Claims{}, fmt.Errorf("no token: %w", ErrLinkRefused)
	}
	c, err := h.svc.Signer.Verify(tok, id, h.svc.now())
	switch {
	case errors.Is(err, token.ErrExpired):
		return c, fmt.Errorf("%w: %w", httpsafe.NewError(http.StatusGone, "expired", "this link has expired; ask for a fresh one"), err)
	case err != nil:
		return c, fmt.Errorf("%w: %w", ErrLinkRefused, err)
	}
	a, d, err := h.svc.Authorize(n.watch(r.Context()), Access{
		ID: id, Tenant: c.Tenant, Via: ViaLink,
		Method: r.Method, Path: r.URL.Path, Source: remoteAddr(r), Header: r.Header,
		Token: &c,
	})
	if err != nil {
		return c, err
	}
	n.served(a)
	hdr := w.Header()
	for k, v := range d.Headers {
		if !protectedHeader(k) {
			hdr.Set(k, v)
		}
	}
	if h.o.Redirect && d.Redirect && r.Method == http.MethodGet {
		if p, ok := h.svc.Store.(Presigner); ok {
			ct, disp := typeAndDisposition(a)
			u, err := p.PresignGet(r.Context(), id, h.o.RedirectTTL, ct, disp)
			if err != nil {
				return c, err
			}
			// No body: the safety headers set on every response are all
			// the 302 carries besides Location.
			hdr.Set("Location", u.String())
			hdr.Set("Content-Length", "0")
			w.WriteHeader(http.StatusFound)
			return c, nil
		}
	}
	h.serveContent(w, r, a)
	return c, nil
}

// serveContent writes a's bytes honouring HEAD, If-Match, If-None-Match and
// Range.
// Memory stays constant: bytes stream from the store unless the cache holds them.
func (h *Handler) serveContent(w http.ResponseWriter, r *http.Request, a Artifact) {
	hdr := w.Header()
	etag := setContentHeaders(hdr, a)
	if answerPreconditions(w, r, etag) {
		return
	}
	off, n, status, ok := contentRange(w, r, a, etag)
	if !ok {
		return
	}
	hdr.Set("Content-Length", strconv.FormatInt(n, 10))
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	h.sendBody(w, r, a, off, n, status)
}

// setContentHeaders sets the headers that describe a (type, disposition,
// entity tag, ranges, expiry) and returns its entity tag.
func setContentHeaders(hdr http.Header, a Artifact) (etag string) {
	etag = `"` + a.SHA256 + `"`
	ct, disp := typeAndDisposition(a)
	// Direct assignments: the names are canonical already, and Set would
	// check each again.
	hdr["Content-Type"] = []string{ct}
	hdr["Content-Disposition"] = []string{disp}
	hdr["Etag"] = []string{etag}
	hdr["Accept-Ranges"] = acceptRanges
	if !a.Expires.IsZero() {
		hdr.Set("Expires", a.Expires.UTC().Format(http.TimeFormat))
	}
	return etag
}

// answerPreconditions answers a request whose If-Match or If-None-Match
// rules out sending the artifact tagged etag (412, 304), and reports
// whether it did. RFC 9110 13.2.2: If-Match first, compared strongly; a
// false one answers 412 before anything else is considered.
func answerPreconditions(w http.ResponseWriter, r *http.Request, etag string) bool {
	if im := r.Header.Get("If-Match"); im != "" && !etagMatch(im, etag, false) {
		writeError(w, httpsafe.NewError(http.StatusPreconditionFailed, "precondition_failed", "the artifact does not match If-Match"))
		return true
	}
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatch(inm, etag, true) {
		w.WriteHeader(http.StatusNotModified)
		return true
	}
	return false
}

// contentRange chooses what of a to send: the one range the request asks
// for (206, with Content-Range set), or else all of it (200). A range
// outside a is answered here with 416, and ok is false.
func contentRange(w http.ResponseWriter, r *http.Request, a Artifact, etag string) (off, n int64, status int, ok bool) {
	rh := r.Header.Get("Range")
	if rh == "" || !ifRangeOK(r, etag) {
		return 0, a.Size, http.StatusOK, true
	}
	rs, err := parseRange(rh, a.Size)
	switch {
	case errors.Is(err, errRangeUnsatisfiable):
		w.Header().Set("Content-Range", "bytes */"+strconv.FormatInt(a.Size, 10))
		writeError(w, httpsafe.NewError(http.StatusRequestedRangeNotSatisfiable, "range_not_satisfiable", "the requested range is outside the artifact"))
		return 0, 0, 0, false
	case err == nil && len(rs) == 1:
		// Several ranges would need multipart/byteranges; serving the whole
		// representation instead is what RFC 9110 allows.
		w.Header().Set("Content-Range", rs[0].contentRange(a.Size))
		return rs[0].start, rs[0].length, http.StatusPartialContent, true
	}
	return 0, a.Size, http.StatusOK, true
}

// sendBody writes status and then n bytes of a from off: from memory when
// the cache holds a or takes it now (smallBytes), streamed from the store
// otherwise.
func (h *Handler) sendBody(w http.ResponseWriter, r *http.Request, a Artifact, off, n int64, status int) {
	body := h.bodyWriter(w)
	ctx := r.Context()
	b, ok, err := h.smallBytes(ctx, a, status == http.StatusOK)
	if err != nil {
		writeError(w, err)
		return
	}
	if ok {
		w.WriteHeader(status)
		body.Write(b[off : off+n])
		body.done()
		return
	}
	rc, err := h.svc.open(ctx, a.ID, off, n)
	if err != nil {
		writeError(w, err)
		return
	}
	defer rc.Close()
	w.WriteHeader(status)
	// A failure mid-stream leaves the body short of Content-Length, which the
	// client sees as a broken transfer, as it must.
	if err := h.copyBody(r, body, rc); err != nil && ctx.Err() == nil {
		h.log.Warn("fetch stream broken", "artifact", a.ID, "err", err)
	} else {
		body.done()
	}
}

// smallBytes returns all of a's bytes, with ok, when the cache holds them,
// or when whole (the request is for all of a) and the cache wants a: it
// reads a from the store once and keeps it. ok false: stream a from the
// store instead.
func (h *Handler) smallBytes(ctx context.Context, a Artifact, whole bool) (b []byte, ok bool, err error) {
	if b, ok := h.svc.Cache.blob(a.ID); ok && int64(len(b)) == a.Size {
		return b, true, nil
	}
	if !whole || !h.svc.Cache.wantsBlob(a.Size) {
		return nil, false, nil
	}
	if b, err = h.readSmall(ctx, a); err != nil {
		return nil, false, err
	}
	h.svc.Cache.addBlob(a.ID, b)
	return b, true, nil
}

// copyBody streams a store reader to r's client: a section of a local
// file by sendfile, a store's own connection by splice (on HTTP/1 without
// TLS, where the server's connection is a plain TCP one), anything else
// through a buffer (512 KiB while few fetches hold one; see copyBuffer)
// rather than the server's ReadFrom and its 32 KiB one, since bigger reads
// cut the per-byte cost.
func (h *Handler) copyBody(r *http.Request, body *stallWriter, rc io.Reader) error {
	if fs, ok := rc.(FileSection); ok {
		return body.sendFile(fs.FileSection())
	}
	if cs, ok := rc.(ConnSection); ok && r.TLS == nil && r.ProtoMajor == 1 {
		return cs.SectionErr(body.splice(cs.ConnSection()))
	}
	buf, release := copyBuffer()
	defer release()
	_, err := io.CopyBuffer(body, rc, buf)
	return err
}

// bodyWriter writes a response body under WriteStallTimeout (limit.go).
func (h *Handler) bodyWriter(w http.ResponseWriter) *stallWriter {
	return &stallWriter{w: w, ctl: *http.NewResponseController(w), timeout: h.o.WriteStallTimeout}
}

func (h *Handler) readSmall(ctx context.Context, a Artifact) ([]byte, error) {
	rc, err := h.svc.open(ctx, a.ID, 0, a.Size)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b := make([]byte, a.Size)
	if _, err := io.ReadFull(rc, b); err != nil {
		return nil, err
	}
	return b, nil
}

// tokenOf returns the token from exactly one place: a single `t` parameter
// (and no other parameter at all), or an Authorization: Bearer header.
func tokenOf(r *http.Request) (string, bool) {
	var fromQuery string
	if q := r.URL.RawQuery; q != "" {
		v, ok := strings.CutPrefix(q, "t=")
		if !ok || strings.ContainsAny(v, "&;=%+") || v == "" {
			return "", false // unsigned, duplicated or encoded parameters
		}
		fromQuery = v
	}
	auth := r.Header.Values("Authorization")
	switch {
	case len(auth) == 0:
		return fromQuery, fromQuery != ""
	case len(auth) == 1 && fromQuery == "":
		scheme, tok, ok := strings.Cut(auth[0], " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return "", false
		}
		return strings.TrimSpace(tok), true
	}
	return "", false
}

// remoteAddr is the connection's peer address. Forwarding headers are not
// trusted: a CIDR binding must not be spoofable by a header.
func remoteAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

var acceptRanges = []string{"bytes"}

// protectedHeader reports whether a policy may not set header k.
func protectedHeader(k string) bool {
	switch http.CanonicalHeaderKey(k) {
	case "X-Content-Type-Options", "Content-Security-Policy", "Referrer-Policy", "Cache-Control",
		"Content-Type", "Content-Length", "Content-Range", "Etag", "Accept-Ranges", "Location",
		"Set-Cookie", "Transfer-Encoding", "Connection", "Cross-Origin-Resource-Policy":
		return true
	}
	return false
}

// typeAndDisposition returns a's Content-Type (the stored mime type,
// re-serialised; anything unparsable becomes application/octet-stream so
// a browser never guesses) and its Content-Disposition: inline only for
// a type a browser renders without running anything of it (inlineTypes),
// attachment otherwise, with a's name (or id) as the filename. The type
// is parsed once for both.
func typeAndDisposition(a Artifact) (ct, disp string) {
	name := a.Name
	if name == "" {
		name = a.ID
	}
	// Most artifacts have a plain lower-case type and a token for a name,
	// which the mime package would give back as they are: spelt here
	// without its parse and maps (a dozen allocations of a small fetch).
	// FuzzTypeAndDisposition holds this to formatTypeAndDisposition.
	major, minor, ok := strings.Cut(a.MimeType, "/")
	if !ok || !isMimeToken(major) || !isMimeToken(minor) || !isLower(a.MimeType) || !isMimeToken(name) {
		return formatTypeAndDisposition(a.MimeType, name)
	}
	return a.MimeType, disposition(a.MimeType) + "; filename=" + name
}

// formatTypeAndDisposition is typeAndDisposition for any type and name,
// through the mime package.
func formatTypeAndDisposition(mimeType, name string) (ct, disp string) {
	ct, mt := "application/octet-stream", ""
	if t, params, err := mime.ParseMediaType(mimeType); err == nil {
		if s := mime.FormatMediaType(t, params); s != "" {
			ct, mt = s, t
		}
	}
	kind := disposition(mt)
	if disp = mime.FormatMediaType(kind, map[string]string{"filename": name}); disp == "" {
		disp = kind
	}
	return ct, disp
}

// isMimeToken reports whether s is a token of RFC 2045 (as package mime
// reads one): printable ASCII other than space and "()<>@,;:\"/[]?=".
func isMimeToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`()<>@,;:\"/[]?=`, c) >= 0 {
			return false
		}
	}
	return true
}

func isLower(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return false
		}
	}
	return true
}

// inlineTypes are the media types served inline: what a browser shows
// with its own viewer, running nothing the bytes say, loading nothing they
// name and following no link in them. Everything else is an attachment
// (downloaded, never rendered in the link's origin): HTML, SVG and XML run
// script; PDF viewers run script and follow links; text/pdf and
// application/x-pdf are PDFs by other names; multipart/x-mixed-replace
// replaces the page with each part, of any type; and a type nobody
// reviewed may be rendered by whatever a browser maps it to.
var inlineTypes = map[string]bool{
	// Text a browser shows as text (nosniff: never sniffed as HTML).
	"text/plain":    true,
	"text/csv":      true, // shown as text; no browser renders it as a table or formula
	"text/markdown": true, // shown as source; no browser renders Markdown
	// JSON: shown as text, or in Firefox's own viewer, which runs none of it.
	"application/json": true,
	// Raster images: decoded to pixels, no script, links or fetches
	// (image/svg+xml is a document with script, so not here).
	"image/png":  true,
	"image/jpeg": true,
	"image/gif":  true,
	"image/webp": true,
	"image/avif": true,
	// Audio and video: played by the built-in media player, which runs
	// none of the file.
	"audio/mpeg": true,
	"audio/wav":  true,
	"audio/ogg":  true,
	"audio/webm": true,
	"video/mp4":  true,
	"video/webm": true,
}

// disposition is "inline" for a type of inlineTypes (mt lower case, no
// parameters), "attachment" for any other.
func disposition(mt string) string {
	if inlineTypes[mt] {
		return "inline"
	}
	return "attachment"
}

// etagMatch reports whether a list of entity tags (If-Match,
// If-None-Match) names etag, or is "*". weak selects RFC 9110's weak
// comparison (If-None-Match), where W/"x" matches "x"; in the strong one
// (If-Match) a weak tag matches nothing.
func etagMatch(header, etag string, weak bool) bool {
	for t := range strings.SplitSeq(header, ",") {
		t = strings.TrimSpace(t)
		if weak {
			t = strings.TrimPrefix(t, "W/")
		}
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

// ifRangeOK reports whether r's Range applies: it does unless If-Range
// names another representation than the one tagged etag.
func ifRangeOK(r *http.Request, etag string) bool {
	ir := r.Header.Get("If-Range")
	return ir == "" || ir == etag
}

// HTTPError returns what a client is told of err: the one place where the
// domain's errors become HTTP statuses, used by the fetch endpoint and the
// management API (artifact/api). An *httpsafe.Error in err's chain is
// answered as it is; a DeniedError with the policy's reason; an error it does not
// know with 503 "unavailable", the store being the likely cause. The
// message never includes err's text, which may hold what only the log
// should see.
func HTTPError(err error) *httpsafe.Error {
	var he *httpsafe.Error
	var de *DeniedError
	switch {
	case errors.As(err, &he):
		return he
	case errors.As(err, &de):
		return httpsafe.NewError(http.StatusForbidden, "denied", de.message())
	case errors.Is(err, ErrLinkRefused):
		// One answer to every token problem, whatever it was.
		return httpsafe.NewError(http.StatusForbidden, "forbidden", "this link is not valid for this request")
	case errors.Is(err, ErrNotFound):
		return httpsafe.NewError(http.StatusNotFound, "not_found", "no such artifact")
	case errors.Is(err, ErrExpired):
		return httpsafe.NewError(http.StatusGone, "expired", "this artifact has expired")
	case errors.Is(err, ErrTooLarge):
		return httpsafe.NewError(http.StatusRequestEntityTooLarge, "too_large", "the artifact exceeds the size limit")
	case errors.Is(err, ErrIntegrity):
		return httpsafe.NewError(http.StatusBadRequest, "integrity", "size or checksum mismatch")
	case errors.Is(err, ErrInvalid):
		return httpsafe.NewError(http.StatusBadRequest, "invalid", "invalid request")
	case errors.Is(err, ErrIncomplete):
		return httpsafe.NewError(http.StatusBadRequest, "incomplete", "the request body was malformed or ended early")
	case errors.Is(err, ErrNoSpace):
		return httpsafe.NewError(http.StatusInsufficientStorage, "insufficient_storage", "the store is full; retry later")
	case errors.Is(err, ErrExists):
		return httpsafe.NewError(http.StatusConflict, "exists", "artifact already exists")
	case errors.Is(err, ErrBusy):
		return httpsafe.NewError(http.StatusServiceUnavailable, "busy", "too many uploads at once; retry shortly")
	case errors.Is(err, ErrRevocationLimit):
		return httpsafe.NewError(http.StatusConflict, "revocation_limit",
			"too many revoked links for this artifact or tenant; delete the artifact to refuse all its links")
	case errors.Is(err, context.Canceled):
		return httpsafe.NewError(499, "canceled", "request canceled")
	case errors.Is(err, ErrMisconfigured):
		// Not passing: no Retry-After, and the operator's log says which.
		return httpsafe.NewError(http.StatusInternalServerError, "store_misconfigured", "the server's storage is misconfigured")
	}
	// ErrUnavailable and anything unexpected: the store is the likely cause.
	return httpsafe.NewError(http.StatusServiceUnavailable, "unavailable", "storage is unavailable; retry shortly")
}

// writeError answers err as HTTPError maps it, and returns the status.
func writeError(w http.ResponseWriter, err error) int {
	return httpsafe.WriteError(w, HTTPError(err))
}

type countingWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (c *countingWriter) WriteHeader(s int) {
	if c.status == 0 {
		c.status = s
	}
	c.ResponseWriter.WriteHeader(s)
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

// ReadFrom keeps the server's sendfile path for file-backed stores.
func (c *countingWriter) ReadFrom(r io.Reader) (int64, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	n, err := io.Copy(c.ResponseWriter, r)
	c.n += n
	return n, err
}

func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// logRequest writes one line; the query string (the token) is never logged.
// It goes to the handler directly, with no caller's program counter:
// Logger.LogAttrs would walk the stack for one on every fetch, for a
// source location that is always this function.
func (h *Handler) logRequest(r *http.Request, id, tokenID string, cw *countingWriter, d time.Duration, err error) {
	ctx := r.Context()
	lh := h.log.Handler()
	if !lh.Enabled(ctx, slog.LevelInfo) {
		return
	}
	rec := slog.NewRecord(time.Now(), slog.LevelInfo, "fetch", 0)
	rec.AddAttrs(
		slog.String("method", r.Method),
		slog.String("artifact", id),
		slog.Int("status", cw.status),
		slog.Int64("bytes", cw.n),
		slog.Duration("dur", d),
		slog.String("remote", r.RemoteAddr),
	)
	if tokenID != "" {
		rec.AddAttrs(slog.String("token_id", tokenID))
	}
	if err != nil {
		rec.AddAttrs(slog.String("err", err.Error()))
	}
	lh.Handle(ctx, rec)
}
