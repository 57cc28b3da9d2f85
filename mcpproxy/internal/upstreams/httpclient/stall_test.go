package httpclient

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// stallServer is an upstream that stops in the middle of its answer to
// a tools/call naming "stall" and then sends nothing more (holding the
// connection open), in one of three ways: on its legacy event stream
// (mode "legacy"), in the event of a Streamable POST's answer ("sse"; or
// "trickle": a byte every 100 ms from there on), or in a JSON body
// ("json"). Everything else is answered at once.
func stallServer(t *testing.T, mode string) (string, *journal) {
	j := &journal{}
	var mu sync.Mutex
	var stream chan string // the legacy stream now open
	post := func(e string) {
		mu.Lock()
		out := stream
		mu.Unlock()
		out <- e
	}
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case mode == "legacy" && r.Method == http.MethodGet:
			j.add("GET")
			out := make(chan string, 8)
			mu.Lock()
			stream = out
			mu.Unlock()
			events(w, "event: endpoint\ndata: /messages\n\n")
			for {
				select {
				case e := <-out:
					events(w, e)
					if !strings.HasSuffix(e, "\n\n") {
						<-r.Context().Done() // half an event, then nothing
						return
					}
				case <-r.Context().Done():
					return
				}
			}
		case r.Method == http.MethodGet:
			w.WriteHeader(http.StatusMethodNotAllowed)
		case r.Method == http.MethodDelete:
		case mode == "legacy" && r.URL.Path == "/mcp":
			w.WriteHeader(http.StatusMethodNotAllowed)
		default:
			m := request(r)
			j.add("POST %s %s", m.Method, string(m.ID))
			result := `{"protocolVersion":"2025-11-25"}`
			if m.Method == "tools/call" {
				text := "ok"
				if strings.Contains(string(m.Params), `"big"`) {
					text = strings.Repeat("x", 256<<10)
				}
				result = `{"content":[{"type":"text","text":"` + text + `"}]}`
			}
			full := `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`
			stall := m.Method == "tools/call" && strings.Contains(string(m.Params), `"stall"`)
			switch {
			case !m.IsRequest():
				w.WriteHeader(http.StatusAccepted)
			case mode == "legacy":
				w.WriteHeader(http.StatusAccepted)
				if stall {
					post("event: message\ndata: " + full[:len(full)/2])
				} else {
					post("event: message\ndata: " + full + "\n\n")
				}
			case stall && mode == "sse":
				events(w, "data: "+full[:len(full)/2])
				<-r.Context().Done()
			case stall && mode == "trickle": // a byte every 100 ms, for ever
				events(w, "data: "+full[:len(full)/2])
				for r.Context().Err() == nil {
					time.Sleep(100 * time.Millisecond)
					events(w, "x")
				}
			case stall && mode == "json":
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", "200")
				io.WriteString(w, full[:len(full)/2])
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			default:
				answer(w, m, result)
			}
		}
	})
	return url, j
}

const stallCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"stall"}}`

// An upstream that stops mid-message gets its request answered with an
// error once StallTimeout has passed, whatever the transport; the legacy
// stream is then reconnected (its handshake replayed) and the next call
// is answered.
func TestUpstreamStallsMidMessage(t *testing.T) {
	for _, mode := range []string{"legacy", "sse", "trickle", "json"} {
		t.Run(mode, func(t *testing.T) {
			url, j := stallServer(t, mode)
			c := dial(t, Options{URL: url, StallTimeout: 300 * time.Millisecond})
			handshake(t, c)
			start := time.Now()
			r := call(t, c, stallCall)
			what := "stream"
			if mode == "json" {
				what = "answer"
			}
			if r.Error == nil || !strings.Contains(string(r.Error), "stalled mid-message for 300ms; its "+what+" was closed") {
				t.Fatalf("the stalled call: %s", r.Raw)
			}
			t.Logf("answered after %v", time.Since(start).Round(time.Millisecond))
			if mode == "legacy" {
				waitFor(t, 10*time.Second, "reconnection with the handshake replayed", func() bool {
					return strings.Contains(strings.Join(j.list(), "|"), `|GET|POST initialize "spillway-reinitialize"`)
				})
			}
			if r := call(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ok"}}`); r.Error != nil {
				t.Fatalf("the next call: %s", r.Raw)
			}
		})
	}
}

// Without the timeout the same call waits (what the guard is for).
func TestUpstreamStallWithoutTimeout(t *testing.T) {
	for _, mode := range []string{"legacy", "sse", "json"} {
		t.Run(mode, func(t *testing.T) {
			url, _ := stallServer(t, mode)
			c := dial(t, Options{URL: url})
			handshake(t, c)
			send(t, c, stallCall)
			select {
			case m := <-c.Recv():
				t.Fatalf("answered with no timeout: %s", m.Raw)
			case <-time.After(time.Second):
			}
		})
	}
}

// A legacy server's answers come on its event stream: a large one goes
// through the Spooler as it arrives (its long text waits on disk), as a
// Streamable server's does.
func TestLegacyStreamIsSpooled(t *testing.T) {
	for _, mode := range []string{"legacy", "sse"} {
		t.Run(mode, func(t *testing.T) {
			url, _ := stallServer(t, mode)
			sp, err := spill.New(spill.Options{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { sp.Close() })
			c := dial(t, Options{URL: url, Spool: sp})
			handshake(t, c)
			r := call(t, c, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big"}}`)
			if r.Error != nil || !spill.HasMarkers(r.Raw) || len(r.Raw) > 4<<10 {
				t.Fatalf("a 256 KiB answer: %d bytes in memory, spilled %v: %.200s", len(r.Raw), spill.HasMarkers(r.Raw), r.Raw)
			}
		})
	}
}

// A legacy stream silent between events (most of its life) is never
// closed by the guard: after three timeouts of silence a call is answered
// on the same stream, with no reconnection.
func TestLegacyStreamIdleIsKept(t *testing.T) {
	url, j := stallServer(t, "legacy")
	c := dial(t, Options{URL: url, StallTimeout: 300 * time.Millisecond})
	handshake(t, c)
	time.Sleep(time.Second)
	if r := call(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ok"}}`); r.Error != nil {
		t.Fatalf("after a silence: %s", r.Raw)
	}
	if got := strings.Count(strings.Join(j.list(), "|"), "GET"); got != 1 {
		t.Errorf("%d GETs (%v), want the one stream", got, j.list())
	}
}
