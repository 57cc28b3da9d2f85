package mcpproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy"
)

// bigText streams n bytes of log-like text that needs JSON escaping (a
// quote, a backslash and a newline on every line) as the inside of a
// JSON string, and the SHA-256 of the text itself.
type bigText struct {
	n    int64
	line []byte
}

func newBigText(n int64) *bigText {
	return &bigText{n: n, line: []byte(`2026-11-26T10:00:00Z INFO served path="/x\y" status=200` + "\n")}
}

// escaped writes the JSON-escaped text to w.
func (b *bigText) escaped(w io.Writer) error {
	esc, _ := json.Marshal(string(b.line))
	esc = esc[1 : len(esc)-1]
	buf := make([]byte, 0, 64<<10)
	for i := int64(0); i < b.n; i += int64(len(b.line)) {
		buf = append(buf, esc...)
		if len(buf) > 60<<10 {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	_, err := w.Write(buf)
	return err
}

func (b *bigText) sum() [32]byte {
	h := sha256.New()
	for i := int64(0); i < b.n; i += int64(len(b.line)) {
		h.Write(b.line)
	}
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

// bigSSEServer is a session-era upstream written by hand whose one tool
// answers with a single SSE event holding the result result writes,
// streamed as it is produced and with the id last, as the TypeScript SDK
// writes its responses.
func bigSSEServer(t *testing.T, result func(io.Writer)) string {
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Mcp-Session-Id", "s1")
		switch req.Method {
		case "initialize":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"big","version":"1"}}}`, req.ID)
		case "tools/call":
			w.Header().Set("Content-Type", "text/event-stream")
			bw := bufio.NewWriterSize(w, 64<<10)
			io.WriteString(bw, `data: {"result":`)
			result(bw)
			fmt.Fprintf(bw, ",\"jsonrpc\":\"2.0\",\"id\":%s}\n\n", req.ID)
			bw.Flush()
		case "tools/list": // what the proxy lists to learn the tool's schema: none
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"big","inputSchema":{"type":"object"}}]}}`, req.ID)
		case "":
			w.WriteHeader(http.StatusAccepted)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
		}
	}))
}

// bigCall makes one tools/call through url and returns the response
// body's SHA-256, size and (up to 64 KiB of) its start.
func bigCall(t *testing.T, url string) (sum [32]byte, size int64, head []byte) {
	t.Helper()
	c := &rawClient{url: url}
	c.do(t, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	c.notify(t, "notifications/initialized")
	resp := c.post(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big","arguments":{}}}`)
	defer resp.Body.Close()
	h := sha256.New()
	var hb bytes.Buffer
	size, err := io.Copy(io.MultiWriter(h, &limitWriter{&hb, 64 << 10}), resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	copy(sum[:], h.Sum(nil))
	return sum, size, hb.Bytes()
}

type limitWriter struct {
	b *bytes.Buffer
	n int
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if room := l.n - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// allocated runs f and returns the bytes the process allocated meanwhile:
// an upper bound on what f held at once.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A 200 MB tool output (SPILLWAY_BIG) arriving as one SSE event from an HTTP upstream is
// offloaded without being held: the whole process (upstream, Spillway,
// client) allocates a small fraction of it, the artifact holds the text
// byte for byte, and the agent gets a small result. Before spilling,
// Spillway held the event, then the result, then a copy: about three
// times the output.
func TestBigSSEOutputOffloaded(t *testing.T) {
	text := newBigText(int64(bigSize(t)))
	up := bigSSEServer(t, func(w io.Writer) {
		io.WriteString(w, `{"content":[{"type":"text","text":"`)
		text.escaped(w)
		io.WriteString(w, `"}]}`)
	})
	svc, url := offloadingSpillway(t, up)
	var size int64
	var head []byte
	idle := idleRSS(t)
	n := allocated(func() { _, size, head = bigCall(t, url) })
	peak := procStatus(t, "VmHWM")
	t.Logf("allocated %d MB for a %d MB output, peak RSS +%d MB over idle; the agent got %d bytes", n>>20, text.n>>20, (peak-idle)>>20, size)
	if n > 64<<20 || peak-idle > 64<<20 {
		t.Errorf("allocated %d MB and peaked %d MB over idle for a %d MB output", n>>20, (peak-idle)>>20, text.n>>20)
	}
	if size > 8000 {
		t.Fatalf("the agent got %d bytes: %.300s", size, head)
	}
	if want := text.sum(); artifactSum(t, svc, head, 0) != want {
		t.Errorf("the artifact differs from the output")
	}
}

func offloadingSpillway(t *testing.T, up string) (*artifact.Service, string) {
	svc := newService(t)
	eng, err := policy.New(context.Background(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up, Transport: "streamable"}, Artifacts: svc,
		Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{}), SpillDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return svc, serve(t, p)
}

// artifactSum is the SHA-256 of the k-th artifact a response (its start,
// head) links to.
func artifactSum(t *testing.T, svc *artifact.Service, head []byte, k int) (sum [32]byte) {
	t.Helper()
	rest := head
	for ; ; k-- {
		i := bytes.Index(rest, []byte(`"uri":"spillway://`))
		if i < 0 {
			t.Fatalf("no link %d in %s", k, head)
		}
		rest = rest[i+7:]
		if k == 0 {
			break
		}
		rest = rest[bytes.IndexByte(rest, '"'):]
	}
	id, _ := artifact.IDFromURI(string(rest[:bytes.IndexByte(rest, '"')]))
	rc, err := svc.Store.Open(context.Background(), id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	h := sha256.New()
	io.Copy(h, rc)
	copy(sum[:], h.Sum(nil))
	return sum
}

// A 500,000-row output (73 MB) in FastMCP's shape (one text item per row, the rows
// again in structuredContent.result: no long string anywhere) is
// offloaded without being held: both arrays go to disk as they arrive,
// content becomes one link to the rows as a JSON array, and
// structuredContent keeps its first rows. Before arrays spilled, the
// message stayed whole in memory.
func TestBigSSERowsOffloaded(t *testing.T) {
	rows := 500000
	limit := uint64(64 << 20)
	if raceEnabled { // slower, and every allocation larger: a held message still shows
		rows, limit = 250000, 128<<20
	}
	// row appends row i, its quotes escaped for a JSON string when esc is
	// set; no allocation, so that what the test measures is Spillway's.
	row := func(b []byte, i int, esc bool) []byte {
		q := `"`
		if esc {
			q = `\"`
		}
		b = append(b, "{"+q+"id"+q+":"...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, ","+q+"customer"+q+":"+q+"customer "...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, q+","+q+"amount"+q+":"...)
		return append(strconv.AppendInt(b, int64(i)*7, 10), '}')
	}
	rowsSum := sha256.New()
	buf := []byte{'['}
	for i := range rows {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = row(buf, i, false)
		rowsSum.Write(buf)
		buf = buf[:0]
	}
	rowsSum.Write([]byte{']'})
	var sent int64 // the result's bytes
	up := bigSSEServer(t, func(w io.Writer) {
		cw := &countWriter{w: w}
		defer func() { sent = cw.n }()
		w = cw
		b := make([]byte, 0, 256)
		io.WriteString(w, `{"content":[`)
		for i := range rows {
			b = b[:0]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"text","text":"`...)
			b = append(row(b, i, true), `"}`...)
			w.Write(b)
		}
		io.WriteString(w, `],"structuredContent":{"result":[`)
		for i := range rows {
			b = b[:0]
			if i > 0 {
				b = append(b, ',')
			}
			w.Write(row(b, i, false))
		}
		io.WriteString(w, `]}}`)
	})
	svc, url := offloadingSpillway(t, up)
	var size int64
	var head []byte
	n := allocated(func() { _, size, head = bigCall(t, url) })
	t.Logf("allocated %d MB for %d rows (%d MB); the agent got %d bytes", n>>20, rows, sent>>20, size)
	if n > limit || (!raceEnabled && n > uint64(sent)) {
		t.Errorf("allocated %d MB for %d rows (%d MB)", n>>20, rows, sent>>20)
	}
	if size > 8000 {
		t.Fatalf("the agent got %d bytes: %.300s", size, head)
	}
	var want [32]byte
	copy(want[:], rowsSum.Sum(nil))
	if artifactSum(t, svc, head, 0) != want || artifactSum(t, svc, head, 1) != want {
		t.Errorf("the artifacts are not the rows as a JSON array")
	}
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
