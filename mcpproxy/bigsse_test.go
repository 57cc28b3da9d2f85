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
// answers with a single SSE event holding a text of n bytes, streamed
// as it is produced and with the id last, as the TypeScript SDK writes
// its responses.
func bigSSEServer(t *testing.T, text *bigText) string {
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
			io.WriteString(bw, `data: {"result":{"content":[{"type":"text","text":"`)
			text.escaped(bw)
			fmt.Fprintf(bw, "\"}]},\"jsonrpc\":\"2.0\",\"id\":%s}\n\n", req.ID)
			bw.Flush()
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

// A 256 MB tool output arriving as one SSE event from an HTTP upstream is
// offloaded without being held: the whole process (upstream, Spillway,
// client) allocates a small fraction of it, the artifact holds the text
// byte for byte, and the agent gets a small result. Before spilling,
// Spillway held the event, then the result, then a copy: about three
// times the output.
func TestBigSSEOutputOffloaded(t *testing.T) {
	text := newBigText(256 << 20)
	up := bigSSEServer(t, text)
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
	url := serve(t, p)
	var size int64
	var head []byte
	n := allocated(func() { _, size, head = bigCall(t, url) })
	t.Logf("allocated %d MB for a %d MB output; the agent got %d bytes", n>>20, text.n>>20, size)
	if n > 64<<20 {
		t.Errorf("allocated %d MB for a %d MB output", n>>20, text.n>>20)
	}
	if size > 8000 {
		t.Fatalf("the agent got %d bytes: %.300s", size, head)
	}
	i := bytes.Index(head, []byte(`"uri":"spillway://`))
	if i < 0 {
		t.Fatalf("no link: %s", head)
	}
	uri := string(head[i+7 : i+7+bytes.IndexByte(head[i+7:], '"')])
	id, _ := artifact.IDFromURI(uri)
	rc, err := svc.Store.Open(context.Background(), id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	h := sha256.New()
	io.Copy(h, rc)
	if want := text.sum(); !bytes.Equal(h.Sum(nil), want[:]) {
		t.Errorf("the artifact differs from the output")
	}
}
