package mcpproxy_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/sse"
)

// streamEvent is one event of a stream as a client read it.
type streamEvent struct {
	id  string
	msg map[string]json.RawMessage
}

// readStreamEvents reads events from r and sends them on out until the
// response ends; then it closes out.
func readStreamEvents(r *sse.Reader, out chan<- streamEvent) {
	defer close(out)
	for {
		ev, err := r.Next()
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if len(ev.Data) > 0 && json.Unmarshal(ev.Data, &m) == nil {
			out <- streamEvent{ev.ID, m}
		}
	}
}

// TestStreamTakeover: a second stream/resume takes a live stream over.
// The first resume's response ends with {status: live, takenOver: true};
// the second, from the last id the client processed, gets every later
// message in order, then the end and {status: completed}; the client,
// dropping ids it has seen, processes each of the 17 once.
func TestStreamTakeover(t *testing.T) {
	t.Parallel()
	up, _ := recordedBigtool(t)
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: up})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c := &streamCaller{url: serve(t, p), era: "stateless", caps: map[string]any{"streams": map[string]any{}}}

	resp := c.post(t, map[string]any{"id": 5, "method": "tools/call", "params": map[string]any{"name": "slow_report",
		"arguments": map[string]any{"seconds": 3, "interval_ms": 200, "size": 1000}, "_meta": map[string]any{"progressToken": "p"}}})
	call := make(chan streamEvent, 100)
	go readStreamEvents(sse.NewReader(resp.Body, 0), call)
	var streamID, last string
	seen := map[string]int{} // event id → times received
	for ev := range call {
		if ev.id != "" {
			seen[ev.id]++
			last = ev.id
		}
		var m struct {
			Method string
			Params struct{ Stream struct{ StreamID string } }
		}
		b, _ := json.Marshal(ev.msg)
		json.Unmarshal(b, &m)
		if m.Method == "notifications/stream/create" {
			streamID = m.Params.Stream.StreamID
		}
		if m.Method == "notifications/progress" {
			break
		}
	}
	resp.Body.Close() // the drop
	if streamID == "" || last == "" {
		t.Fatalf("no stream/create and progress (stream %q, last id %q)", streamID, last)
	}

	first := c.post(t, map[string]any{"id": 6, "method": "stream/resume", "params": map[string]any{"streamId": streamID, "lastEventId": last}})
	defer first.Body.Close()
	if !strings.HasPrefix(first.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("stream/resume: %s %s: %s", first.Status, first.Header.Get("Content-Type"), messages(t, first))
	}
	a := make(chan streamEvent, 100)
	go readStreamEvents(sse.NewReader(first.Body, 0), a)
	select { // the first resume carries a message, then it is taken over
	case ev, ok := <-a:
		if !ok || ev.id == "" {
			t.Fatalf("the first resume ended before any message (%s)", jsonText(ev.msg))
		}
		seen[ev.id]++
		last = ev.id
	case <-time.After(10 * time.Second):
		t.Fatal("the first resume carried nothing")
	}
	// The client takes the stream over from the last id it processed (a
	// message the first connection gets meanwhile may come again, with its
	// id: the client drops it).
	second := c.post(t, map[string]any{"id": 7, "method": "stream/resume", "params": map[string]any{"streamId": streamID, "lastEventId": last}})
	defer second.Body.Close()
	b := make(chan streamEvent, 100)
	go readStreamEvents(sse.NewReader(second.Body, 0), b)

	var firstEnd, secondEnd string
	for ev := range a {
		if ev.id == "" {
			firstEnd = string(ev.msg["result"])
			continue
		}
		seen[ev.id]++
	}
	var results, ends int
	after, _ := strconv.Atoi(last)
	for ev := range b {
		if ev.id == "" {
			secondEnd = string(ev.msg["result"])
			continue
		}
		if n, _ := strconv.Atoi(ev.id); n != after+1 {
			t.Errorf("the second resume from id %s carried id %s after %d", last, ev.id, after)
		} else {
			after = n
		}
		if seen[ev.id] > 0 {
			continue // already processed
		}
		seen[ev.id]++
		if string(ev.msg["id"]) == "5" && ev.msg["result"] != nil {
			results++
		}
		if strings.Contains(string(ev.msg["method"]), "notifications/stream/end") {
			ends++
		}
	}
	if want := `{"streamId":"` + streamID + `","status":"live","takenOver":true}`; !jsonEqual(firstEnd, want) {
		t.Errorf("the first resume ended with %s, want %s", firstEnd, want)
	}
	if want := `{"streamId":"` + streamID + `","status":"completed"}`; !jsonEqual(secondEnd, want) {
		t.Errorf("the second resume ended with %s, want %s", secondEnd, want)
	}
	if results != 1 || ends != 1 {
		t.Errorf("the second resume carried %d results and %d ends, want 1 each", results, ends)
	}
	for i := 1; i <= len(seen); i++ {
		if n := seen[strconv.Itoa(i)]; n != 1 {
			t.Errorf("event id %d processed %d times, want once (ids %v)", i, n, seen)
		}
	}
	if len(seen) != 17 { // 15 progress notifications, the result, the end
		t.Errorf("%d distinct event ids, want 17: %v", len(seen), seen)
	}
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	return jsonText(x) == jsonText(y)
}

// TestStreamClientCancels: an explicit notifications/cancelled from the
// client still cancels a streamed request after its connection dropped:
// the upstream is told, and the stream ends (a resume then delivers its
// end). Malformed stream params answer -32602.
func TestStreamClientCancels(t *testing.T) {
	t.Parallel()
	up, url := hangingProxy(t, mcpproxy.Options{})
	c := &streamCaller{url: url, era: "session", caps: map[string]any{"streams": map[string]any{}}}
	c.initialize(t)
	stream := c.openStream(t, 7)
	upID := up.nextCall(t)
	c.post(t, map[string]any{"method": "notifications/cancelled", "params": map[string]any{"requestId": 7, "reason": "the user stopped it"}}).Body.Close()
	for deadline := time.Now().Add(10 * time.Second); !up.cancelledFor(upID); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			msgs, _ := up.received()
			t.Fatalf("the upstream was not told of the cancellation:\n%s", strings.Join(msgs, "\n"))
		}
	}
	var poll string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		poll = c.request(t, 8, "stream/poll", map[string]any{"streamId": stream})
		if strings.Contains(poll, `"status":"completed"`) || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(poll, `"status":"completed"`) {
		t.Fatalf("the cancelled stream never ended: %s", poll)
	}
	msgs := messages(t, c.post(t, map[string]any{"id": 9, "method": "stream/resume", "params": map[string]any{"streamId": stream}}))
	if all := strings.Join(msgs, "\n"); !strings.Contains(all, `"notifications/stream/end"`) || !strings.Contains(msgs[len(msgs)-1], `"status":"completed"`) {
		t.Errorf("the resume of the cancelled stream: %s", all)
	}

	for i, params := range []map[string]any{{"streamId": 5}, {}, {"streamId": stream, "lastEventId": "x"}} {
		method := "stream/poll"
		if i == 2 {
			method = "stream/resume"
		}
		if got := c.request(t, 20+i, method, params); !strings.Contains(got, `"code":-32602`) {
			t.Errorf("%s %v: %s, want -32602", method, params, got)
		}
	}
}

// TestStreamServerRequest: a server-to-client request waits in a dropped
// stream like any message: a poll shows it (hasRequest), the resume
// delivers it with an event id, the client's answer reaches the upstream,
// and the call's result and the end follow on the same resume.
func TestStreamServerRequest(t *testing.T) {
	t.Parallel()
	up, url := hangingProxy(t, mcpproxy.Options{})
	c := &streamCaller{url: url, era: "session", caps: map[string]any{"streams": map[string]any{}, "roots": map[string]any{}}}
	c.initialize(t)
	resp := c.post(t, map[string]any{"id": 7, "method": "tools/call", "params": map[string]any{"name": "ask", "arguments": map[string]any{}}})
	call := make(chan streamEvent, 10)
	go readStreamEvents(sse.NewReader(resp.Body, 0), call)
	var stream string
	if ev := <-call; string(ev.msg["method"]) == `"notifications/stream/create"` {
		var ps struct{ Stream struct{ StreamID string } }
		json.Unmarshal(ev.msg["params"], &ps)
		stream = ps.Stream.StreamID
	}
	resp.Body.Close() // the drop, before the request is read
	if stream == "" {
		t.Fatal("no notifications/stream/create first")
	}
	var poll string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		poll = c.request(t, 8, "stream/poll", map[string]any{"streamId": stream})
		if strings.Contains(poll, `"hasRequest":true`) || time.Now().After(deadline) {
			break
		}
	}
	var pr pollResult
	json.Unmarshal(json.RawMessage(resultOf(t, poll)), &pr)
	if pr != (pollResult{StreamID: stream, Status: "live", PendingMessages: true, HasRequest: true}) {
		t.Fatalf("poll with the upstream's request pending: %s", poll)
	}

	resume := c.post(t, map[string]any{"id": 9, "method": "stream/resume", "params": map[string]any{"streamId": stream}})
	defer resume.Body.Close()
	evs := make(chan streamEvent, 10)
	go readStreamEvents(sse.NewReader(resume.Body, 0), evs)
	var got []string
	for ev := range evs {
		got = append(got, ev.id+" "+jsonText(ev.msg))
		if string(ev.msg["method"]) == `"roots/list"` {
			if ev.id == "" {
				t.Error("the upstream's request came without an event id")
			}
			c.post(t, map[string]any{"id": json.RawMessage(ev.msg["id"]), "result": map[string]any{"roots": []any{}}}).Body.Close()
		}
	}
	all := strings.Join(got, "\n")
	if len(got) != 4 || !strings.Contains(got[0], `"roots/list"`) || !strings.Contains(got[1], `the client answered`) ||
		!strings.Contains(got[2], "notifications/stream/end") || !strings.Contains(got[3], `"status":"completed"`) {
		t.Errorf("the resume carried:\n%s\nwant the request, the result, the end and the resume's answer", all)
	}
	if !strings.Contains(all, `\"roots\":[]`) {
		t.Errorf("the upstream did not get the client's answer:\n%s", all)
	}
	if msgs, _ := up.received(); !strings.Contains(strings.Join(msgs, "\n"), `"id":"q1"`) {
		t.Errorf("the answer reached the upstream without the id it asked with:\n%s", strings.Join(msgs, "\n"))
	}
}

// resultOf is the result of a raw JSON-RPC response.
func resultOf(t *testing.T, raw string) string {
	t.Helper()
	var m struct{ Result json.RawMessage }
	if json.Unmarshal([]byte(raw), &m) != nil || m.Result == nil {
		t.Fatalf("not a result: %s", raw)
	}
	return string(m.Result)
}
