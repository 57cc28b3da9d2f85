package mcpproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy"
)

// bigSize is the text of the hostile-size result: the figure for
// a message relayed without offloading. 1 GiB passes too (SPILLWAY_BIG=1073741824),
// at about five times the time.
func bigSize(t *testing.T) int {
	if s := os.Getenv("SPILLWAY_BIG"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if raceEnabled {
		return 96 << 20 // still far past what the bound would let a held copy be
	}
	return 200 << 20
}

// bigBlock is the text's unit, escapes of every kind included.
var bigBlock = func() []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < 4000; i++ {
		fmt.Fprintf(&b, `row %06d: caf\u00e9 \"quoted\" back\\slash\ttab \ud83d\ude00 %s\n`, i, strings.Repeat("x", 40))
	}
	return b.Bytes()
}()

// writeBig writes the result line the TypeScript SDK would write for one
// text item of about n bytes: "id" last. It never holds the line.
func writeBig(w io.Writer, id string, n int) error { return writeBigWith(w, id, n, "") }

// writeBigWith is writeBig with more members after the result's content
// (members: "" or `,"name":value...`).
func writeBigWith(w io.Writer, id string, n int, members string) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	bw.WriteString(`{"result":{"content":[{"type":"text","text":"`)
	for k := 0; k < n; k += len(bigBlock) {
		bw.Write(bigBlock)
	}
	bw.WriteString(`"}]` + members + `},"jsonrpc":"2.0","id":` + id + `}`)
	return bw.Flush()
}

// TestSpillChild is not a test: run as `<test binary>
// -test.run=^TestSpillChild$ -- spillbig N`, it is a stdio MCP server
// whose every tools/call answers with one text item of N bytes, in one
// line, its id last; in mode spilldie it writes the first N bytes of
// that line and dies.
func TestSpillChild(t *testing.T) {
	mode := childMode()
	if mode != "spillbig" && mode != "spilldie" && mode != "spillimage" && mode != "spillstall" {
		t.Skip("the hostile-size child of TestSpillRelay")
	}
	n, _ := strconv.Atoi(os.Args[len(os.Args)-1])
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			os.Exit(0) // without the test binary's "PASS" on stdout
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(line, &m) != nil || m.ID == nil {
			continue
		}
		switch m.Method {
		case "initialize":
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"big","version":"1"}}}`+"\n", m.ID)
		case "tools/call":
			if mode == "spilldie" || mode == "spillstall" {
				io.WriteString(os.Stdout, `{"result":{"content":[{"type":"text","text":"`)
				for k := 0; k < n; k += len(bigBlock) {
					os.Stdout.Write(bigBlock)
				}
				if mode == "spillstall" {
					io.Copy(io.Discard, in) // then nothing, until stdin closes
				}
				os.Exit(1)
			}
			if mode == "spillimage" {
				writeBigImage(os.Stdout, string(m.ID), n)
			} else {
				writeBig(os.Stdout, string(m.ID), n)
			}
			os.Stdout.WriteString("\n")
		default:
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", m.ID)
		}
	}
}

// procStatus reads a figure (kB) of this process from /proc/self/status.
func procStatus(t *testing.T, key string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", key)
	return 0
}

// idleRSS settles the heap, resets the peak (VmHWM) and returns the
// resident size.
func idleRSS(t *testing.T) int64 {
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Skipf("cannot reset the peak RSS: %v", err)
	}
	return procStatus(t, "VmRSS")
}

// hashLine hashes r up to the next "\n" (not included), never holding it.
func hashLine(r *bufio.Reader) ([]byte, int64, error) {
	h := sha256.New()
	var n int64
	for {
		chunk, err := r.ReadSlice('\n')
		if err == nil {
			chunk = chunk[:len(chunk)-1]
		}
		h.Write(chunk)
		n += int64(len(chunk))
		if err == nil {
			return h.Sum(nil), n, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return h.Sum(nil), n, err
		}
	}
}

// hashBody hashes the one JSON-RPC message of a POST's answer: the body
// (JSON) or the data of its first event (SSE).
func hashBody(ct string, body io.Reader) ([]byte, int64, error) {
	r := bufio.NewReaderSize(body, 256<<10)
	if !strings.HasPrefix(ct, "text/event-stream") {
		h := sha256.New()
		n, err := io.Copy(h, r)
		return h.Sum(nil), n, err
	}
	for {
		head, err := r.Peek(6)
		if err != nil {
			return nil, 0, fmt.Errorf("no data line: %w", err)
		}
		if string(head) == "data: " {
			r.Discard(6)
			return hashLine(r)
		}
		if _, _, err := hashLine(r); err != nil { // another field, a comment
			return nil, 0, err
		}
	}
}

// checkRelayed checks what a client got of a big answer: the upstream's
// bytes, with Spillway's peak RSS (VmHWM, reset by idleRSS) at most 64 MB
// above idle.
func checkRelayed(t *testing.T, how string, idle int64, got, want []byte, size int64) {
	t.Helper()
	peak := procStatus(t, "VmHWM")
	t.Logf("%d MB relayed %s: idle RSS %d MB, peak %d MB (+%d MB)", size>>20, how, idle>>20, peak>>20, (peak-idle)>>20)
	if !bytes.Equal(got, want) {
		t.Fatalf("the client got %d bytes that are not the upstream's", size)
	}
	if peak-idle > 64<<20 {
		t.Errorf("peak RSS %d MB above idle, over 64 MB", (peak-idle)>>20)
	}
}

// TestSpillRelay: a stdio upstream answers a tools/call with one 200 MB
// line, its id last, and Spillway relays it with offloading off, over
// HTTP and over its own stdio face. The client gets the child's bytes
// exactly (SHA-256), and Spillway's peak RSS stays within 64 MB of idle:
// the message's text waits on disk, never in memory, whole or in part.
// Twice, with disk room for one answer: a written answer frees its space.
func TestSpillRelay(t *testing.T) {
	n := bigSize(t)
	want := sha256.New()
	writeBig(want, "7", n)
	wantSum := want.Sum(nil)
	cmd := os.Args[0]
	args := []string{"-test.run=^TestSpillChild$", "--", "spillbig", strconv.Itoa(n)}
	// Room on disk for one answer, not two: what was written to the
	// client for good must be freed at once, not at its TTL. StrictEras:
	// the child speaks only the session era, and the client's request is
	// relayed as the child answers it, byte for byte (bridged, its result
	// would gain the 2026-07-28 resultType).
	o := mcpproxy.Options{Upstream: &mcpproxy.CommandUpstream{Command: cmd, Args: args},
		SpillDir: t.TempDir(), SpillMax: int64(n) * 3 / 2, StdioMaxMessage: -1, StrictEras: true}

	t.Run("http", func(t *testing.T) {
		p, err := mcpproxy.New(o)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		url := serve(t, p)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a deadlock guard
		defer cancel()
		idle := idleRSS(t)
		for range 2 {
			resp, err := statelessPost(ctx, url, 7, "tools/call", map[string]any{"name": "export", "arguments": map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			got, size, err := hashBody(resp.Header.Get("Content-Type"), resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			checkRelayed(t, "over HTTP", idle, got, wantSum, size)
		}
	})

	t.Run("stdio", func(t *testing.T) { relayStdio(t, o, wantSum) })
}

// relayStdio serves a proxy for o on its stdio face and has it relay two
// big answers (checkRelayed) to a client on the other end of two pipes.
func relayStdio(t *testing.T, o mcpproxy.Options, wantSum []byte) {
	o.StdioMaxMessage = -1
	p, err := mcpproxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a deadlock guard
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.ServeStdio(ctx, inR, outW); outW.Close() }()
	out := bufio.NewReaderSize(outR, 256<<10)
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if _, _, err := hashLine(out); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	idle := idleRSS(t)
	for range 2 {
		fmt.Fprintln(inW, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"export","arguments":{}}}`)
		got, size, err := hashLine(out)
		if err != nil {
			t.Fatal(err)
		}
		checkRelayed(t, "over stdio", idle, got, wantSum, size)
	}
	inW.Close()
	if err := <-done; err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, context.Canceled) {
		t.Logf("ServeStdio: %v", err)
	}
}

// bigHTTPUpstream is a Streamable HTTP MCP server that answers every
// tools/call with one text item of n bytes, its id last: in one SSE event
// (with an event id) when sse, else as a JSON body. It streams the
// answer, never holding it.
func bigHTTPUpstream(t *testing.T, n int, sse bool) string { return serve(t, bigHTTP(n, sse)) }

// bigHTTP is bigHTTPUpstream's handler.
func bigHTTP(n int, sse bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if json.Unmarshal(body, &m) != nil || m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		switch {
		case m.Method != "tools/call":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)
		case sse:
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "id: ev-1\nevent: message\ndata: ") // an id: resumable, from the upstream
			writeBig(w, string(m.ID), n)
			io.WriteString(w, "\n\n")
		default:
			w.Header().Set("Content-Type", "application/json")
			writeBig(w, string(m.ID), n)
		}
	})
}

// keepsSessions makes h a server of the session era that keeps sessions,
// as the SDKs' servers do: an initialize gets a new one (Mcp-Session-Id),
// answered here; any other request without one is refused (400), with
// one it did not give, or no longer keeps, too (404).
func keepsSessions(h http.Handler) http.Handler {
	var mu sync.Mutex
	known := map[string]bool{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		sid := r.Header.Get("Mcp-Session-Id")
		mu.Lock()
		ok := known[sid]
		if sid == "" && bytes.Contains(body, []byte(`"method":"initialize"`)) {
			sid = "s-" + strconv.Itoa(len(known)+1)
			known[sid], ok = true, true
			w.Header().Set("Mcp-Session-Id", sid)
		}
		mu.Unlock()
		switch {
		case sid == "":
			http.Error(w, "Mcp-Session-Id required", http.StatusBadRequest)
		case !ok:
			http.Error(w, "unknown session", http.StatusNotFound)
		case bytes.Contains(body, []byte(`"method":"initialize"`)):
			var m struct{ ID json.RawMessage }
			json.Unmarshal(body, &m)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"big","version":"1"}}}`, m.ID)
		default:
			h.ServeHTTP(w, r)
		}
	})
}

// TestSpillRelayHTTP: the same for an HTTP upstream, whose 200 MB answer
// comes as one SSE event or one JSON body, relayed with offloading off
// over HTTP, and over the stdio face (Spillway's own client of it).
func TestSpillRelayHTTP(t *testing.T) {
	n := bigSize(t)
	want := sha256.New()
	writeBig(want, "7", n)
	wantSum := want.Sum(nil)
	// Spillway's stdio face, its client and the upstream's SSE answer.
	t.Run("stdio-sse", func(t *testing.T) {
		relayStdio(t, mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: bigHTTPUpstream(t, n, true), Transport: "streamable"},
			SpillDir: t.TempDir(), SpillMax: int64(n) * 3 / 2}, wantSum)
	})
	for _, sse := range []bool{true, false} {
		t.Run(map[bool]string{true: "sse", false: "json"}[sse], func(t *testing.T) {
			p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: bigHTTPUpstream(t, n, sse), Transport: "streamable"},
				SpillDir: t.TempDir(), SpillMax: int64(n) * 3 / 2})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			url := serve(t, p)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a deadlock guard
			defer cancel()
			idle := idleRSS(t)
			for range 2 { // room on disk for one: the first must be freed once written
				resp, err := statelessPost(ctx, url, 7, "tools/call", map[string]any{"name": "export", "arguments": map[string]any{}})
				if err != nil {
					t.Fatal(err)
				}
				got, size, err := hashBody(resp.Header.Get("Content-Type"), resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				checkRelayed(t, "from an HTTP upstream", idle, got, wantSum, size)
			}
		})
	}
}

// spillFiles counts this process's open files in dir (unlinked or not).
func spillFiles(t *testing.T, dir string) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}

// TestSpillChildDiesMidLine: a child that dies 50 MB into a line leaves
// nothing on disk: its request gets an error, and no spill file stays
// open; the next child's answer goes through.
func TestSpillChildDiesMidLine(t *testing.T) {
	dir := t.TempDir()
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.CommandUpstream{Command: os.Args[0],
		Args: []string{"-test.run=^TestSpillChild$", "--", "spilldie", strconv.Itoa(50 << 20)}}, SpillDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	url := serve(t, p)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a deadlock guard
	defer cancel()
	resp, err := statelessPost(ctx, url, 7, "tools/call", map[string]any{"name": "export", "arguments": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(body, []byte(`"error"`)) || len(body) > 4096 {
		t.Fatalf("the client got %d bytes: %.200s", len(body), body)
	}
	if n := spillFiles(t, dir); n != 0 {
		t.Fatalf("%d spill files still open after the child died", n)
	}
}

// A tenant whose client reads a big answer slowly holds that answer's
// strings in the spill space until it is written: one tenant may hold at
// most its share (SpillMaxTenant, half of SpillMax by default) there, so
// that another tenant's answer still finds room. Here tenant A leaves one
// 32 MiB answer unread (pinned: more than loopback's buffers take) and
// asks for a second, which is refused past its share (1.25 × the answer);
// tenant B's answer then fits in what is left (2.5 × the answer). Without
// the share, A's second answer is spilled too (and B's refused). From an
// HTTP upstream (the relay reads for the request's tenant), from one
// that keeps sessions (a stateless call is bridged: Spillway's own
// client keeps the session, on a connection of the tenant's) and from a
// stdio child and a legacy HTTP+SSE server (a tenant's own connection,
// read for that tenant), stateless and in
// sessions (each call in a session of its own: one session's answers
// come in order, and the first is left unread).
func TestSpillShareTenants(t *testing.T) {
	const n = 32 << 20
	tenants, err := identity.ParseTenants("tok-aaaaaaaaaaaaaaaa=A,tok-bbbbbbbbbbbbbbbb=B")
	if err != nil {
		t.Fatal(err)
	}
	for name, up := range map[string]mcpproxy.Upstream{
		"http": &mcpproxy.HTTPUpstream{URL: bigHTTPUpstream(t, n, true), Transport: "streamable"},
		// A stateless call is bridged: Spillway's own client of it keeps
		// the sessions, one connection per tenant.
		"http-sessions": &mcpproxy.HTTPUpstream{URL: serve(t, keepsSessions(bigHTTP(n, true))), Transport: "streamable"},
		"child":         &mcpproxy.CommandUpstream{Command: os.Args[0], Args: []string{"-test.run=^TestSpillChild$", "--", "spillbig", strconv.Itoa(n)}},
		// Spillway's own client of it, one connection per tenant or session.
		"legacy": &mcpproxy.HTTPUpstream{URL: bigLegacyUpstream(t, n) + "/sse", Transport: "sse"},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := mcpproxy.New(mcpproxy.Options{Upstream: up, Tenants: tenants, SpillDir: t.TempDir(), SpillMax: n * 5 / 2,
				StrictEras: name != "http-sessions"})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			url := serve(t, p)
			bridged := "" // what a stateless call's answer gets when the proxy keeps its session
			if name == "http-sessions" {
				bridged = `,"resultType":"complete"`
			}
			t.Run("stateless", func(t *testing.T) { shareTenants(t, url, n, false, bridged) })
			if name != "http" { // the Streamable HTTP upstream keeps no sessions
				t.Run("sessions", func(t *testing.T) { shareTenants(t, url, n, true, "") })
			}
		})
	}
}

func shareTenants(t *testing.T, url string, n int, sessions bool, bridged string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a deadlock guard
	defer cancel()
	call := func(token string, id int) *http.Response {
		t.Helper()
		var resp *http.Response
		var err error
		if sessions {
			sid := initSession(t, ctx, url, token)
			resp, err = sessionPost(ctx, url, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"export","arguments":{}}}`, id), token)
		} else {
			req := statelessRequest(ctx, url, id, "tools/call", map[string]any{"name": "export", "arguments": map[string]any{}})
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err = http.DefaultClient.Do(req)
		}
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// A's first answer: read until it is being written (so read whole
	// from the upstream, and spilled), then left unread.
	pinned := call("tok-aaaaaaaaaaaaaaaa", 1)
	defer pinned.Body.Close()
	if _, err := io.ReadFull(pinned.Body, make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	// A's second: refused past A's share, with a JSON-RPC error.
	second := call("tok-aaaaaaaaaaaaaaaa", 2)
	body, err := io.ReadAll(io.LimitReader(second.Body, 1<<20))
	second.Body.Close()
	if err != nil || !bytes.Contains(body, []byte(`"error"`)) || bytes.Contains(body, []byte(`"result"`)) {
		t.Fatalf("A's second answer past its share: %d bytes %.300q, %v; want a JSON-RPC error", len(body), body, err)
	}
	// B's, with the id of A's pinned one: answered whole while A's is pinned.
	want := sha256.New()
	writeBigWith(want, "1", n, bridged)
	b := call("tok-bbbbbbbbbbbbbbbb", 1)
	got, size, err := hashBody(b.Header.Get("Content-Type"), b.Body)
	b.Body.Close()
	if err != nil || !bytes.Equal(got, want.Sum(nil)) {
		t.Fatalf("B's answer while A holds its share: %d bytes, %v (sha256 %x, want %x)", size, err, got, want.Sum(nil))
	}
}

// bigLegacyUpstream is a legacy HTTP+SSE MCP server: each GET opens a
// stream whose endpoint takes that connection's requests; a tools/call
// is answered on it with one text item of n bytes, its id last (as
// writeBig writes it).
func bigLegacyUpstream(t *testing.T, n int) string {
	var mu sync.Mutex
	streams := map[string]chan func(io.Writer){}
	next := 0
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			out := make(chan func(io.Writer), 16)
			mu.Lock()
			next++
			c := strconv.Itoa(next)
			streams[c] = out
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: endpoint\ndata: /messages?c=%s\n\n", c)
			w.(http.Flusher).Flush()
			for {
				select {
				case write := <-out:
					write(w)
					w.(http.Flusher).Flush()
				case <-r.Context().Done():
					return
				}
			}
		}
		if r.URL.Path != "/messages" {
			w.WriteHeader(http.StatusMethodNotAllowed) // no Streamable HTTP
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		w.WriteHeader(http.StatusAccepted)
		mu.Lock()
		out := streams[r.URL.Query().Get("c")]
		mu.Unlock()
		if req.ID == nil || out == nil {
			return
		}
		out <- func(w io.Writer) {
			io.WriteString(w, "event: message\ndata: ")
			if req.Method == "tools/call" {
				writeBig(w, string(req.ID), n)
			} else {
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"old","version":"1"}}}`, req.ID)
			}
			io.WriteString(w, "\n\n")
		}
	}))
}
