package resumable

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

// face is a stand-in for a face (our own interface): a tools/call is
// answered on an event stream with n progress notifications, one per
// step, then its response; it records whether its context was cancelled
// and what else it was sent.
type face struct {
	n    int
	step time.Duration

	mu        sync.Mutex
	cancelled bool
	done      chan struct{}
	got       []string // methods of the requests and notifications it served
}

func newFace(n int, step time.Duration) *face {
	return &face{n: n, step: step, done: make(chan struct{}, 16)}
}

func (f *face) ServeHTTP(w http.ResponseWriter, r *http.Request, rq ownmethods.Request) {
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.DecodeMessage(body)
	if err != nil {
		http.Error(w, "bad", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.got = append(f.got, m.Method)
	f.mu.Unlock()
	if m.Method != "tools/call" {
		if m.IsRequest() {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"error":{"code":-32601,"message":"Method not found"}}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	defer func() { f.done <- struct{}{} }()
	sse.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	sw := sse.NewWriter(w)
	for i := 1; i <= f.n; i++ {
		sw.Write(sse.Event{HasData: true, Data: []byte(fmt.Sprintf(
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":%d}}`, i))})
		select {
		case <-time.After(f.step):
		case <-r.Context().Done():
			f.mu.Lock()
			f.cancelled = true
			f.mu.Unlock()
			return
		}
	}
	sw.Write(sse.Event{HasData: true, Data: []byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"text","text":"done"}]}}`)})
}

func (f *face) wasCancelled() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cancelled
}

type env struct {
	t   *testing.T
	reg *Registry
	f   *face
	url string
}

func newEnv(t *testing.T, f *face, o Options) *env {
	o.Methods = ownmethods.New(ownmethods.Options{})
	reg := New(o)
	t.Cleanup(reg.Close)
	h := reg.HTTP(f)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r, ownmethods.Request{Tenant: r.Header.Get("X-Tenant")})
	}))
	t.Cleanup(srv.Close)
	return &env{t: t, reg: reg, f: f, url: srv.URL}
}

const stateless = "2026-07-28"

// post sends a stateless-era request declaring streams (caps false: not).
func (e *env) post(ctx context.Context, tenant, method string, id int, params map[string]any, caps bool) *http.Response {
	e.t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	meta := map[string]any{jsonrpc.MetaProtocolVersion: stateless}
	if caps {
		meta[jsonrpc.MetaClientCapabilities] = map[string]any{"streams": map[string]any{}}
	}
	params["_meta"] = meta
	msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if id > 0 {
		msg["id"] = id
	}
	b, _ := json.Marshal(msg)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.url, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", stateless)
	req.Header.Set("Mcp-Method", method)
	req.Header.Set("X-Tenant", tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return resp
}

// event is one SSE event read by the test's own small parser.
type event struct {
	id   string
	data map[string]any
}

func readEvent(br *bufio.Reader) (event, error) {
	var ev event
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" && ev.data != nil:
			return ev, nil
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(line[6:]), &ev.data); err != nil {
				return ev, err
			}
		}
	}
}

func (e *env) call(method string, id int, params map[string]any) map[string]any {
	e.t.Helper()
	resp := e.post(e.t.Context(), "a", method, id, params, true)
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		e.t.Fatalf("%s: %v", method, err)
	}
	return out
}

// A client that drops its connection after the first progress loses
// nothing: the face's run goes on, poll says what waits, and resume from
// the last id it processed gives the rest exactly once, then the end.
func TestDropPollResume(t *testing.T) {
	f := newFace(5, 100*time.Millisecond)
	e := newEnv(t, f, Options{})
	ctx, cancel := context.WithCancel(t.Context())
	resp := e.post(ctx, "a", "tools/call", 7, map[string]any{"name": "slow"}, true)
	br := bufio.NewReader(resp.Body)
	create, err := readEvent(br)
	if err != nil || create.data["method"] != "notifications/stream/create" || create.id != "" {
		t.Fatalf("first event: %+v %v", create, err)
	}
	params := create.data["params"].(map[string]any)
	sid := params["stream"].(map[string]any)["streamId"].(string)
	if len(sid) != 32 || params["requestId"] != float64(7) {
		t.Fatalf("create: %v", params)
	}
	first, err := readEvent(br)
	if err != nil || first.id != "1" {
		t.Fatalf("first message: %+v %v", first, err)
	}
	cancel()
	resp.Body.Close()
	time.Sleep(250 * time.Millisecond)
	poll := e.call("stream/poll", 8, map[string]any{"streamId": sid})["result"].(map[string]any)
	if poll["status"] != "live" || poll["pendingMessages"] != true || poll["hasError"] != false {
		t.Fatalf("poll while running: %v", poll)
	}
	<-f.done
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		// The face's output is read back a moment after it returns.
		if poll = e.call("stream/poll", 9, map[string]any{"streamId": sid})["result"].(map[string]any); poll["status"] == "completed" {
			break
		}
	}
	if poll["status"] != "completed" || poll["pendingMessages"] != true {
		t.Fatalf("poll after the end: %v", poll)
	}
	if f.wasCancelled() {
		t.Fatal("the face's run was cancelled when the client left")
	}
	resp = e.post(t.Context(), "a", "stream/resume", 10, map[string]any{"streamId": sid, "lastEventId": "1"}, true)
	defer resp.Body.Close()
	br = bufio.NewReader(resp.Body)
	var ids []string
	var methods []any
	for {
		ev, err := readEvent(br)
		if err != nil {
			break
		}
		ids = append(ids, ev.id)
		methods = append(methods, ev.data["method"])
		if ev.data["id"] == float64(10) {
			if r := ev.data["result"].(map[string]any); r["status"] != "completed" {
				t.Fatalf("resume's answer: %v", r)
			}
		}
	}
	want := []string{"2", "3", "4", "5", "6", "7", ""}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("resumed ids %v, want %v (methods %v)", ids, want, methods)
	}
	if methods[4] != nil || methods[5] != "notifications/stream/end" {
		t.Fatalf("resumed: %v", methods)
	}
	// Delivered, it lingers: a resume from an id before the end gets the
	// end again (a client whose connection was closing may not have it).
	if r := e.call("stream/poll", 11, map[string]any{"streamId": sid})["result"].(map[string]any); r["status"] != "completed" || r["pendingMessages"] != false {
		t.Fatalf("poll of a delivered stream: %v", r)
	}
	again := e.post(t.Context(), "a", "stream/resume", 12, map[string]any{"streamId": sid, "lastEventId": "6"}, true)
	defer again.Body.Close()
	if ev, err := readEvent(bufio.NewReader(again.Body)); err != nil || ev.id != "7" || ev.data["method"] != "notifications/stream/end" {
		t.Fatalf("resume of a delivered stream from before its end: %+v %v", ev, err)
	}
}

// A stream nobody reads, polls or resumes for ResumeMax is abandoned: the
// face's run is cancelled, and the id then answers as an unknown one —
// exactly as another tenant's id does.
func TestAbandonAndForeign(t *testing.T) {
	f := newFace(100, 50*time.Millisecond)
	e := newEnv(t, f, Options{ResumeMax: 300 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	resp := e.post(ctx, "a", "tools/call", 1, map[string]any{"name": "slow"}, true)
	create, err := readEvent(bufio.NewReader(resp.Body))
	if err != nil {
		t.Fatal(err)
	}
	sid := create.data["params"].(map[string]any)["stream"].(map[string]any)["streamId"].(string)
	foreign := e.post(t.Context(), "b", "stream/poll", 2, map[string]any{"streamId": sid}, true)
	fb, _ := io.ReadAll(foreign.Body)
	unknownResp := e.post(t.Context(), "a", "stream/poll", 2, map[string]any{"streamId": strings.Repeat("0", 32)}, true)
	ub, _ := io.ReadAll(unknownResp.Body)
	if string(fb) != string(ub) || !strings.Contains(string(fb), fmt.Sprint(CodeUnknownStream)) {
		t.Fatalf("another tenant's id: %s; an unknown id: %s", fb, ub)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-f.done:
	case <-time.After(3 * time.Second):
		t.Fatal("the abandoned stream's run was not cancelled")
	}
	if !f.wasCancelled() {
		t.Fatal("the run ended, not cancelled")
	}
	r := e.call("stream/resume", 3, map[string]any{"streamId": sid})
	if r["error"].(map[string]any)["code"] != float64(CodeUnknownStream) {
		t.Fatalf("resume of an abandoned stream: %v", r)
	}
	if e.reg.Len() != 0 || e.reg.Held() != 0 {
		t.Fatalf("after abandonment: %d streams, %d bytes held", e.reg.Len(), e.reg.Held())
	}
}

// Past its bound a detached stream ends with an error response the
// client sees (hasError), its run cancelled; nothing goes silently.
func TestBound(t *testing.T) {
	f := newFace(1000, time.Millisecond)
	e := newEnv(t, f, Options{StreamMax: 4 << 10})
	ctx, cancel := context.WithCancel(t.Context())
	resp := e.post(ctx, "a", "tools/call", 1, map[string]any{"name": "slow"}, true)
	create, _ := readEvent(bufio.NewReader(resp.Body))
	sid := create.data["params"].(map[string]any)["stream"].(map[string]any)["streamId"].(string)
	cancel()
	resp.Body.Close()
	<-f.done
	if !f.wasCancelled() {
		t.Fatal("the run went on past the bound")
	}
	poll := e.call("stream/poll", 2, map[string]any{"streamId": sid})["result"].(map[string]any)
	if poll["status"] != "completed" || poll["hasError"] != true {
		t.Fatalf("poll: %v", poll)
	}
	if h := e.reg.Held(); h > 4<<10+512 {
		t.Fatalf("held %d bytes, bound 4 KiB", h)
	}
}

// A client that declares nothing reaches the face untouched: stream/poll
// goes to it (which answers method not found), a call is answered with
// no stream announced.
func TestNotDeclared(t *testing.T) {
	f := newFace(1, time.Millisecond)
	e := newEnv(t, f, Options{})
	resp := e.post(t.Context(), "a", "stream/poll", 1, map[string]any{"streamId": "x"}, false)
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "Method not found") {
		t.Fatalf("stream/poll: %s", b)
	}
	resp = e.post(t.Context(), "a", "tools/call", 2, map[string]any{"name": "x"}, false)
	b, _ = io.ReadAll(resp.Body)
	if strings.Contains(string(b), "stream/create") || !strings.Contains(string(b), `"id":2`) {
		t.Fatalf("tools/call: %s", b)
	}
	if e.reg.Len() != 0 {
		t.Fatal("a stream was opened for a client that declared nothing")
	}
}

// One tenant cannot hold every stream: with room for two, a tenant gets
// one, and the other tenant still gets its own.
func TestTenantShare(t *testing.T) {
	f := newFace(50, 20*time.Millisecond)
	e := newEnv(t, f, Options{MaxStreams: 2})
	first := e.post(t.Context(), "a", "tools/call", 1, map[string]any{"name": "slow"}, true)
	defer first.Body.Close()
	if ev, err := readEvent(bufio.NewReader(first.Body)); err != nil || ev.data["method"] != "notifications/stream/create" {
		t.Fatalf("a's first: %+v %v", ev, err)
	}
	second := e.post(t.Context(), "a", "tools/call", 2, map[string]any{"name": "slow"}, true)
	b, _ := io.ReadAll(second.Body)
	if !strings.Contains(string(b), "too many open streams") {
		t.Fatalf("a's second: %s", b)
	}
	other := e.post(t.Context(), "b", "tools/call", 3, map[string]any{"name": "slow"}, true)
	defer other.Body.Close()
	if ev, err := readEvent(bufio.NewReader(other.Body)); err != nil || ev.data["method"] != "notifications/stream/create" {
		t.Fatalf("b's: %+v %v", ev, err)
	}
}

// A message larger than the stream's bound reaches a client that is
// reading (it would not wait); the bound is on what waits.
func TestLargeMessageToReader(t *testing.T) {
	big := strings.Repeat("x", 8<<10)
	h := HandlerFunc(func(w http.ResponseWriter, r *http.Request, _ ownmethods.Request) {
		body, _ := io.ReadAll(r.Body)
		m, _ := jsonrpc.DecodeMessage(body)
		sse.SetHeaders(w.Header())
		sse.NewWriter(w).Write(sse.Event{HasData: true, Data: []byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"content":[{"type":"text","text":"` + big + `"}]}}`)})
	})
	reg := New(Options{StreamMax: 4 << 10, Methods: ownmethods.New(ownmethods.Options{})})
	t.Cleanup(reg.Close)
	front := reg.HTTP(h)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { front.ServeHTTP(w, r, ownmethods.Request{}) }))
	t.Cleanup(srv.Close)
	e := &env{t: t, reg: reg, url: srv.URL}
	resp := e.post(t.Context(), "", "tools/call", 1, map[string]any{"name": "big"}, true)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	readEvent(br) // create
	ev, err := readEvent(br)
	if err != nil || ev.data["result"] == nil {
		t.Fatalf("the large answer: %+v %v", ev, err)
	}
}
