package resumable

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

// bulkFace answers a tools/call at once with n notifications of size
// bytes each, then its response: a fast face whose output outruns any
// client. It sends on done, if not nil, once it wrote its answer.
func bulkFace(n, size int, done chan<- struct{}) HandlerFunc {
	pad := strings.Repeat("x", size)
	return func(w http.ResponseWriter, r *http.Request, _ ownmethods.Request) {
		if done != nil {
			defer func() { done <- struct{}{} }()
		}
		body, _ := io.ReadAll(r.Body)
		m, _ := jsonrpc.DecodeMessage(body)
		sse.SetHeaders(w.Header())
		sw := sse.NewWriter(w)
		for i := 1; i < n; i++ {
			sw.Write(sse.Event{HasData: true, Data: []byte(fmt.Sprintf(
				`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"%d %s"}}`, i, pad))})
		}
		sw.Write(sse.Event{HasData: true, Data: []byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"text","text":"done"}]}}`)})
	}
}

func newBulkEnv(t *testing.T, h HandlerFunc, o Options) *env {
	o.Methods = ownmethods.New(ownmethods.Options{})
	reg := New(o)
	t.Cleanup(reg.Close)
	front := reg.HTTP(h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		front.ServeHTTP(w, r, ownmethods.Request{Tenant: r.Header.Get("X-Tenant")})
	}))
	t.Cleanup(srv.Close)
	return &env{t: t, reg: reg, url: srv.URL}
}

// streamID reads the create notification that opens a stream's response.
func streamID(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	create, err := readEvent(br)
	if err != nil || create.data["method"] != "notifications/stream/create" {
		t.Fatalf("first event: %+v %v", create, err)
	}
	return create.data["params"].(map[string]any)["stream"].(map[string]any)["streamId"].(string)
}

// readAll reads events to the end of the response: their ids, and
// whether the stream's end was among them.
func readAll(br *bufio.Reader) (ids []string, ended bool) {
	for {
		ev, err := readEvent(br)
		if err != nil {
			return ids, ended
		}
		ids = append(ids, ev.id)
		if ev.data["method"] == "notifications/stream/end" {
			ended = true
		}
	}
}

// A client that keeps its connection open but stops reading is cut after
// WriteStall, as if it had dropped: it does not hold the stream, and a
// resume from the last id it read gets the rest exactly once.
func TestStalledReaderIsCut(t *testing.T) {
	const n, size = 200, 128 << 10 // 25 MiB: more than the sockets' buffers hold
	done := make(chan struct{}, 1)
	e := newBulkEnv(t, bulkFace(n, size, done), Options{StreamMax: 64 << 20, TotalMax: 128 << 20,
		MaxMessage: 1 << 20, WriteStall: 200 * time.Millisecond})
	resp := e.post(t.Context(), "a", "tools/call", 1, map[string]any{"name": "bulk"}, true)
	defer resp.Body.Close()
	br := bufio.NewReaderSize(resp.Body, 1<<20)
	sid := streamID(t, br)
	if ev, err := readEvent(br); err != nil || ev.id != "1" {
		t.Fatalf("first message: %+v %v", ev, err)
	}
	// Every message waits in the stream once the face is done (its
	// output is read back as it writes); then this client reads nothing
	// for five times WriteStall.
	<-done
	time.Sleep(time.Second)
	ids, ended := readAll(br)
	if ended {
		t.Fatalf("a client that stopped reading got the whole stream (%d events): it was never cut", len(ids))
	}
	last := "1"
	for i, id := range ids {
		if want := fmt.Sprint(i + 2); id != want {
			t.Fatalf("event %d of the stalled connection has id %q, want %s", i, id, want)
		}
		last = id
	}
	// A resume is read as fast as this test reads; one that is slow
	// (under -race) may be cut in its turn, and resumes again.
	next, _ := strconv.Atoi(last)
	for try := 2; !ended; try++ {
		if try > 50 {
			t.Fatalf("no resume reached the end; the last id delivered is %d", next)
		}
		again := e.post(t.Context(), "a", "stream/resume", try, map[string]any{"streamId": sid, "lastEventId": strconv.Itoa(next)}, true)
		var rest []string
		rest, ended = readAll(bufio.NewReaderSize(again.Body, 1<<20))
		again.Body.Close()
		for _, id := range rest {
			if id == "" { // the resume's own answer
				continue
			}
			if next++; id != strconv.Itoa(next) {
				t.Fatalf("resumed id %s, want %d", id, next)
			}
		}
	}
	if next != n+1 { // n messages, then the end
		t.Fatalf("the last id delivered is %d, want %d", next, n+1)
	}
}

// deliver runs a call whose client reads its stream to the end, and
// returns the stream's id.
func deliver(t *testing.T, e *env, tenant string, id int) string {
	t.Helper()
	resp := e.post(t.Context(), tenant, "tools/call", id, map[string]any{"name": "bulk"}, true)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	sid := streamID(t, br)
	if _, ended := readAll(br); !ended {
		t.Fatalf("call %d: the stream did not end", id)
	}
	return sid
}

// pollStatus is a stream's status as stream/poll tells tenant, or the
// error code.
func pollStatus(e *env, tenant, sid string) string {
	resp := e.post(e.t.Context(), tenant, "stream/poll", 99, map[string]any{"streamId": sid}, true)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch s := string(b); {
	case strings.Contains(s, `"status":"completed"`):
		return "completed"
	case strings.Contains(s, fmt.Sprint(CodeUnknownStream)):
		return "unknown"
	default:
		return s
	}
}

// Delivered streams linger uncounted, but no more of them than
// MaxStreams: past that the oldest is freed.
func TestLingeringCap(t *testing.T) {
	e := newBulkEnv(t, bulkFace(3, 10, nil), Options{MaxStreams: 2})
	var ids []string
	for i := 1; i <= 3; i++ { // each delivered: none open, so none refused
		ids = append(ids, deliver(t, e, "a", i))
	}
	got := []string{pollStatus(e, "a", ids[0]), pollStatus(e, "a", ids[1]), pollStatus(e, "a", ids[2])}
	if fmt.Sprint(got) != "[unknown completed completed]" {
		t.Fatalf("after three delivered streams with room for two: %v", got)
	}
	if e.reg.Len() != 2 {
		t.Fatalf("%d streams kept, want 2", e.reg.Len())
	}
}

// A lingering stream's copy gives way to messages that wait: when a
// detached stream needs the bytes TotalMax has left, the delivered
// stream is freed, not the waiting one failed.
func TestReclaimLingering(t *testing.T) {
	e := newBulkEnv(t, bulkFace(4, 2<<10, nil), Options{StreamMax: 12 << 10, TotalMax: 12 << 10, MaxMessage: 1 << 20})
	first := deliver(t, e, "a", 1) // lingers with ~6 KiB
	if h := e.reg.Held(); h < 6<<10 {
		t.Fatalf("the delivered stream holds %d bytes", h)
	}
	// Another tenant's client drops at once: its ~6 KiB wait, and with
	// the first one's they would pass TotalMax.
	ctx, cancel := context.WithCancel(t.Context())
	resp := e.post(ctx, "b", "tools/call", 2, map[string]any{"name": "bulk"}, true)
	second := streamID(t, bufio.NewReader(resp.Body))
	cancel()
	resp.Body.Close()
	var st string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if st = pollStatus(e, "b", second); st == "completed" {
			break
		}
	}
	if st != "completed" {
		t.Fatalf("the waiting stream: %s", st)
	}
	if st := pollStatus(e, "a", first); st != "unknown" {
		t.Fatalf("the lingering stream was kept (%s) while another's messages needed its bytes", st)
	}
	resp = e.post(t.Context(), "b", "stream/resume", 4, map[string]any{"streamId": second, "lastEventId": "0"}, true)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if strings.Contains(string(b), "passed its bound") || !strings.Contains(string(b), `"text":"done"`) {
		t.Fatalf("the waiting stream lost its messages: %.300s", b)
	}
}
