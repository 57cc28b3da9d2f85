package mcpproxy

import (
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestEventLog(t *testing.T) {
	l := newEventLog(200*time.Millisecond, 100)
	a1 := l.add("a", []byte("one"))
	l.add("a", []byte("two"))
	l.add("b", []byte("other stream"))
	evs, ok := l.after(a1)
	if !ok || len(evs) != 1 || string(evs[0].Data) != "two" {
		t.Fatalf("after %s: %v %v", a1, evs, ok)
	}
	if _, ok := l.after("nope_1"); ok {
		t.Error("an unknown stream replays nothing")
	}
	l.add("c", make([]byte, 90)) // over the byte bound: the oldest go
	if l.held() > 100 {
		t.Errorf("holds %d bytes, bound 100", l.held())
	}
	time.Sleep(250 * time.Millisecond)
	l.prune()
	if l.held() != 0 || len(l.streams) != 0 {
		t.Errorf("after the window: %d bytes in %d streams", l.held(), len(l.streams))
	}
}

// A client that never comes back: its session's replay log and backlog
// are freed once the window has passed.
func TestAbandonedStreamIsFreed(t *testing.T) {
	p, err := New(Options{Upstream: &CommandUpstream{Command: "sh", Args: []string{"-c",
		// A stdio "server" that answers initialize, then sends notifications for ever.
		`read l; echo '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}'; ` +
			`while true; do echo '{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"tick"}}'; sleep 0.02; done`}},
		StreamWindow: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := &http.Server{Handler: p}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/mcp"
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	get, _ := http.NewRequest(http.MethodGet, url, nil)
	get.Header.Set("Accept", "text/event-stream")
	get.Header.Set("Mcp-Session-Id", sid)
	resp, err = http.DefaultClient.Do(get)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	resp.Body.Read(buf) // some events flow, then the client vanishes
	resp.Body.Close()
	s := p.sessions.lookup(sid)
	if s == nil {
		t.Fatal("session gone")
	}
	time.Sleep(100 * time.Millisecond)
	if s.log.held() == 0 {
		t.Fatal("nothing logged while the stream was open")
	}
	deadline := time.Now().Add(3 * time.Second)
	for {
		s.mu.Lock()
		backlog := len(s.backlog)
		s.mu.Unlock()
		// Notifications keep coming; what matters is that nothing older
		// than the window is kept.
		if s.log.held() == 0 && backlog < 40 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the window: %d bytes logged, %d messages parked", s.log.held(), backlog)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Last-Event-ID comes from clients: any value replays nothing or the
// events after a real id of the log, never others, and never panics.
func FuzzLastEventID(f *testing.F) {
	l := newEventLog(time.Minute, 1<<20)
	sid := newStreamID()
	for i := range 5 {
		l.add(sid, []byte{byte('a' + i)})
	}
	other := newStreamID()
	l.add(other, []byte("other"))
	for _, s := range []string{sid + "_2", sid + "_0", sid + "_-1", sid + "_99999999999999999999", "_1", "", "x_y_z", other + "_0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		evs, ok := l.after(id)
		if !ok {
			if len(evs) != 0 {
				t.Fatalf("%q: events without a stream", id)
			}
			return
		}
		if len(evs) > 5 {
			t.Fatalf("%q replays %d events", id, len(evs))
		}
		for _, ev := range evs {
			if string(ev.Data) == "other" && len(evs) != 1 {
				t.Fatalf("%q mixes streams", id)
			}
			if ev.ID <= id && len(ev.ID) == len(id) {
				t.Fatalf("%q replays %q, which is not after it", id, ev.ID)
			}
		}
	})
}
