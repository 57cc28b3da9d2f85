package mcpproxy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// The tests of resumable streams (issue 41) as a client sees them: the
// client is testdata/streamclient/streamclient.py, a real process written
// from the draft and Spillway's wire contract with the Python standard
// library only; each test checks the JSON report it prints.

// python3 finds the interpreter: $SPILLWAY_PYTHON, else python3 on PATH.
// With CI set, a missing one fails the test instead of skipping it.
func python3(t *testing.T) string {
	t.Helper()
	p := os.Getenv("SPILLWAY_PYTHON")
	if p == "" {
		p, _ = exec.LookPath("python3")
	}
	if p == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no python3 (SPILLWAY_PYTHON or PATH)")
		}
		t.Skip("no python3 (SPILLWAY_PYTHON or PATH)")
	}
	return p
}

// streamClient runs the test client with args and decodes its report.
func streamClient(t *testing.T, args ...string) map[string]any {
	t.Helper()
	script := filepath.Join(moduleRoot(t), "mcpproxy", "testdata", "streamclient", "streamclient.py")
	cmd := exec.Command(python3(t), append([]string{script}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("streamclient %v: %v\n%s", args, err, stderr.Bytes())
	}
	var report map[string]any
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("streamclient's report: %v\n%s", err, out)
	}
	return report
}

// recordedBigtool is bigtool as a stdio upstream whose stdin is copied to
// a file, so a test can read every message the upstream received.
func recordedBigtool(t *testing.T) (up *mcpproxy.CommandUpstream, received func() string) {
	t.Helper()
	bin := buildBigtool(t)
	log := filepath.Join(t.TempDir(), "upstream-stdin")
	up = &mcpproxy.CommandUpstream{Command: "/bin/sh", Args: []string{"-c", `tee -a "$0" | exec "$1"`, log, bin}}
	return up, func() string {
		b, _ := os.ReadFile(log)
		return string(b)
	}
}

var streamIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// jsonGet walks a decoded JSON value along keys (object keys, or array
// indexes as decimal strings); nil where the path does not exist.
func jsonGet(v any, keys ...string) any {
	for _, k := range keys {
		switch x := v.(type) {
		case map[string]any:
			v = x[k]
		case []any:
			i, err := strconv.Atoi(k)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestStreamDropAndResume is issue 41's first Done-when case, in both eras
// over HTTP: the client calls a tool that runs 10 s and sends progress
// every second, drops its connection after the first progress
// notification, polls (live, pending messages), waits for the end, polls
// (completed), resumes from the last event id it processed, and gets every
// progress notification it missed and the result exactly once, then
// notifications/stream/end; the upstream saw no cancellation.
func TestStreamDropAndResume(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("the tool runs 10 s")
	}
	for _, era := range []string{"stateless", "session"} {
		t.Run(era, func(t *testing.T) {
			t.Parallel()
			up, received := recordedBigtool(t)
			p, err := mcpproxy.New(mcpproxy.Options{Upstream: up})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			url := serve(t, p)
			const size = 4000
			r := streamClient(t, "--url", url, "--era", era, "--seconds", "10", "--interval-ms", "1000",
				"--size", strconv.Itoa(size), "drop-and-resume")
			checkDropAndResume(t, r, size)
			if got := received(); strings.Contains(got, "notifications/cancelled") {
				t.Errorf("the upstream was told to cancel:\n%s", got)
			} else if strings.Contains(got, `"stream/`) {
				t.Errorf("a stream/* request reached the upstream:\n%s", got)
			}
		})
	}
}

// checkDropAndResume checks a drop-and-resume report against the contract.
func checkDropAndResume(t *testing.T, r map[string]any, size int) {
	t.Helper()
	callID := r["call_id"]
	streamID, _ := r["stream_id"].(string)
	if !streamIDPattern.MatchString(streamID) {
		t.Fatalf("stream id %q: want 32 lowercase hex characters", streamID)
	}
	if r["era"] == "session" {
		if caps := jsonGet(r["initialize"], "result", "capabilities", "streams", "resumeInterval"); caps == nil {
			t.Errorf("initialize declares no streams.resumeInterval: %s", jsonText(jsonGet(r["initialize"], "result", "capabilities")))
		}
	}
	events, _ := r["events"].([]any)
	if len(events) == 0 {
		t.Fatal("no events")
	}
	first := jsonGet(events[0], "message")
	if jsonGet(first, "method") != "notifications/stream/create" || jsonGet(events[0], "id") != nil {
		t.Fatalf("first event %s: want notifications/stream/create without an event id", jsonText(events[0]))
	}
	if rid := jsonGet(first, "params", "requestId"); jsonText(rid) != jsonText(callID) {
		t.Errorf("stream/create's requestId %s, want the call's id %s", jsonText(rid), jsonText(callID))
	}
	if ri := jsonGet(first, "params", "stream", "resumeInterval"); jsonGet(ri, "min") == nil || jsonGet(ri, "max") == nil {
		t.Errorf("stream/create without resumeInterval {min, max}: %s", jsonText(first))
	}
	checkPolls(t, r, streamID)

	// Every message by event id: each id once, the ids 1, 2, 3… in order
	// across the call and the resume, each progress step once, the
	// result once, then stream/end.
	byID := map[string]int{}
	var progress []float64
	var results, ends int
	last := 0
	for _, ev := range events[1:] {
		id, _ := jsonGet(ev, "id").(string)
		m := jsonGet(ev, "message")
		if jsonGet(ev, "phase") == "resume" && jsonGet(m, "id") != nil && jsonText(jsonGet(m, "id")) == jsonText(r["resume_id"]) {
			continue // the resume request's own response: checked below
		}
		n, err := strconv.Atoi(id)
		if err != nil {
			t.Errorf("event without a numeric id: %s", jsonText(ev))
			continue
		}
		if byID[id]++; byID[id] > 1 {
			t.Errorf("event id %s delivered twice: %s", id, jsonText(m))
			continue
		}
		if n != last+1 {
			t.Errorf("event id %d after %d: want consecutive ids", n, last)
		}
		last = n
		if ends > 0 {
			t.Errorf("a message after notifications/stream/end: %s", jsonText(m))
		}
		switch {
		case jsonGet(m, "method") == "notifications/progress":
			pg, _ := jsonGet(m, "params", "progress").(float64)
			progress = append(progress, pg)
		case jsonGet(m, "method") == "notifications/stream/end":
			ends++
			if jsonGet(m, "params", "streamId") != streamID {
				t.Errorf("stream/end of %v, want %s", jsonGet(m, "params", "streamId"), streamID)
			}
			if results != 1 {
				t.Errorf("stream/end after %d results, want 1", results)
			}
		case jsonText(jsonGet(m, "id")) == jsonText(callID):
			results++
			text, _ := jsonGet(m, "result", "content", "0", "text").(string)
			if len(text) != size || !strings.HasPrefix(text, "# slow_report") {
				t.Errorf("the result is not slow_report's full output (%d bytes, want %d): %.200s", len(text), size, jsonText(m))
			}
		default:
			t.Errorf("unexpected message on the stream: %s", jsonText(m))
		}
	}
	if ends != 1 {
		t.Errorf("%d notifications/stream/end, want 1", ends)
	}
	if results != 1 {
		t.Errorf("%d results, want 1", results)
	}
	want := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if jsonText(progress) != jsonText(want) {
		t.Errorf("progress %v, want %v (each once, in order)", progress, want)
	}
	if ct, _ := r["resume_content_type"].(string); !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("stream/resume answered %q, want an event stream", ct)
	}
	if res := jsonGet(r["resume_response"], "result"); jsonGet(res, "streamId") != streamID || jsonGet(res, "status") != "completed" {
		t.Errorf("resume's own response %s, want {streamId, status: completed}", jsonText(r["resume_response"]))
	}
	// Its end written to a connection, the stream lingers two minutes
	// (a resume from before the end would get the end again), with
	// nothing pending.
	if st, pend := jsonGet(r["poll_after_resume"], "result", "status"), jsonGet(r["poll_after_resume"], "result", "pendingMessages"); st != "completed" || pend != false {
		t.Errorf("a poll after the resume delivered the end: %s, want completed with nothing pending (the stream lingers)", jsonText(r["poll_after_resume"]))
	}
	t.Logf("dropped after event %v", r["dropped_after"])
}

// checkPolls checks the polls a drop-and-resume report made: live with
// pending messages after the drop, completed with pending messages at the
// end, answered as JSON.
func checkPolls(t *testing.T, r map[string]any, streamID string) {
	t.Helper()
	polls, _ := r["polls"].([]any)
	if len(polls) < 2 {
		t.Fatalf("%d polls: %s", len(polls), jsonText(polls))
	}
	for i, want := range []struct {
		status  string
		pending bool
	}{{"live", true}, {"completed", true}} {
		pl := polls[0]
		if i == 1 {
			pl = polls[len(polls)-1]
		}
		if ct, _ := jsonGet(pl, "content_type").(string); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("stream/poll answered %q, want application/json", ct)
		}
		res := jsonGet(pl, "message", "result")
		if jsonGet(res, "streamId") != streamID || jsonGet(res, "status") != want.status ||
			jsonGet(res, "pendingMessages") != want.pending || jsonGet(res, "hasRequest") != false || jsonGet(res, "hasError") != false {
			t.Errorf("poll %d: %s, want {streamId, status: %s, pendingMessages: %v, hasRequest: false, hasError: false}",
				i, jsonText(jsonGet(pl, "message")), want.status, want.pending)
		}
	}
}

// TestStreamStdio: over Spillway's stdio face (the real binary, `spillway
// serve --stdio`), a client polls and resumes a live stream, and gets the
// progress and the result once, then notifications/stream/end.
func TestStreamStdio(t *testing.T) {
	t.Parallel()
	bin := buildSpillway(t)
	r := streamClient(t, "--seconds", "3", "--interval-ms", "500", "--size", "3000", "stdio-live", "--",
		bin, "serve", "--stdio", "--upstream-cmd", buildBigtool(t), "--listen", "127.0.0.1:0", "--data", t.TempDir())
	streamID, _ := r["stream_id"].(string)
	if !streamIDPattern.MatchString(streamID) {
		t.Fatalf("stream id %q: want 32 lowercase hex characters", streamID)
	}
	if jsonGet(r["initialize"], "result", "capabilities", "streams", "resumeInterval") == nil {
		t.Errorf("initialize declares no streams.resumeInterval: %s", jsonText(r["initialize"]))
	}
	if res := jsonGet(r["poll"], "result"); jsonGet(res, "streamId") != streamID || jsonGet(res, "status") != "live" ||
		jsonGet(res, "hasError") != false || jsonGet(res, "hasRequest") != false {
		t.Errorf("poll of the live stream: %s", jsonText(r["poll"]))
	}
	if res := jsonGet(r["resume_response"], "result"); res == nil || jsonGet(res, "streamId") != streamID {
		t.Errorf("resume of the live stream: %s", jsonText(r["resume_response"]))
	}
	var progress []float64
	var creates, results, ends int
	for _, m := range r["messages"].([]any) {
		switch {
		case jsonGet(m, "method") == "notifications/stream/create":
			creates++
			if jsonText(jsonGet(m, "params", "requestId")) != jsonText(r["call_id"]) {
				t.Errorf("stream/create for request %s, want %s", jsonText(jsonGet(m, "params", "requestId")), jsonText(r["call_id"]))
			}
		case jsonGet(m, "method") == "notifications/progress":
			pg, _ := jsonGet(m, "params", "progress").(float64)
			progress = append(progress, pg)
		case jsonGet(m, "method") == "notifications/stream/end":
			ends++
			if results != 1 {
				t.Errorf("stream/end after %d results", results)
			}
		case jsonText(jsonGet(m, "id")) == jsonText(r["call_id"]):
			results++
			if text, _ := jsonGet(m, "result", "content", "0", "text").(string); len(text) != 3000 {
				t.Errorf("result: %.300s", jsonText(m))
			}
		}
	}
	want := []float64{1, 2, 3, 4, 5, 6}
	if creates != 1 || results != 1 || ends != 1 || jsonText(progress) != jsonText(want) {
		t.Errorf("%d creates, %d results, %d ends, progress %v: want one each and progress %v", creates, results, ends, progress, want)
	}
}

// buildSpillway builds the spillway command into a temporary directory.
func buildSpillway(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "spillway")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/spillway")
	cmd.Dir = moduleRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build spillway: %v\n%s", err, out)
	}
	return bin
}

var _ = time.Second
