package ownmethods

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"testing"

	"github.com/itchyny/gojq"
	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/arttools"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/offload"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
	"github.com/spillway-dev/spillway/policy"
)

// spoolEnv is newEnv wired as the proxy wires it: an offloader that
// resolves spilled strings and taps them as they arrive, and the spooler
// that spills them.
func spoolEnv(t *testing.T, lim arttools.Limits) (*env, *spill.Spooler) {
	e := newEnv(t, nil, Options{})
	eng, err := policy.New(ctx, policy.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	off := offload.New(e.svc, eng, offload.Options{Spills: offload.Registry{}, Logger: slog.New(slog.DiscardHandler)})
	sp, err := spill.New(spill.Options{Dir: t.TempDir(), Tap: off.Tap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	e.m = New(Options{Artifacts: e.svc, Offloader: off, Spool: sp, ToolLimits: lim, Logger: slog.New(slog.DiscardHandler)})
	return e, sp
}

// stockJQ is what jq answers: each output of program over the JSON
// document data, one line of compact JSON. gojq computes it here apart
// from the tool; the stock jq, where it is installed, must agree (the
// document's keys are sorted and its numbers integers, where the two
// print alike).
func stockJQ(t *testing.T, program string, data []byte) []byte {
	t.Helper()
	q, err := gojq.Parse(program)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	iter := q.Run(v)
	for {
		x, ok := iter.Next()
		if !ok {
			break
		}
		if err, ok := x.(error); ok {
			t.Fatal(err)
		}
		b, _ := gojq.Marshal(x)
		out.Write(append(b, '\n'))
	}
	if path, err := exec.LookPath("jq"); err == nil {
		cmd := exec.Command(path, "-c", program)
		cmd.Stdin = bytes.NewReader(data)
		stock, err := cmd.Output()
		if err != nil || !bytes.Equal(stock, out.Bytes()) {
			t.Fatalf("jq -c %s: %v, %d bytes; gojq: %d bytes", program, err, len(stock), out.Len())
		}
	} else {
		t.Log("no jq on PATH: gojq's answer alone is the reference")
	}
	return out.Bytes()
}

// A jq answer of several MiB is stored whole: the artifact its link
// names holds every output, byte for byte what jq prints, and the answer
// in the result is its header, a preview and the link. Before, the
// answer was cut at 1 MiB and the cut answer offloaded.
func TestJQLongAnswerStoredWhole(t *testing.T) {
	e, sp := spoolEnv(t, arttools.Limits{})
	rows := make([]map[string]any, 9000)
	for i := range rows {
		rows[i] = map[string]any{"a_id": i, "b_name": fmt.Sprintf("customer \"%d\" é ✓", i), "c_note": strings.Repeat("x\\y\t", 100+i%50), "d_tags": []any{i % 7, "t"}}
	}
	doc, _ := json.Marshal(rows)
	a := e.publish(t, "acme", "application/json", doc)
	program := ".[] | {a_id, b_name, c_note, d_tags}"
	want := stockJQ(t, program, doc)
	if len(want) < 4<<20 {
		t.Fatalf("the answer is %d bytes: want several MiB", len(want))
	}

	reply := e.callTool(t, Request{Tenant: "acme"}, arttools.JQ, map[string]any{"uri": artifact.URI(a.ID), "program": program, "maxOutputs": 10000})
	text, isErr := toolText(t, reply)
	head, _, _ := strings.Cut(text, "\n")
	if isErr || !strings.HasSuffix(head, ": 9000 output(s)") || len(reply.Raw) > 8<<10 {
		t.Fatalf("isError %v, %d bytes, head %q", isErr, len(reply.Raw), head)
	}
	if got := e.fullAnswer(t, reply); got != string(want) {
		t.Fatalf("the stored answer is %d bytes, want jq's %d (first difference at byte %d)", len(got), len(want), firstDiff(got, string(want)))
	}
	var r struct {
		Content []struct{ Type, MimeType string } `json:"content"`
	}
	json.Unmarshal(reply.Result, &r)
	if len(r.Content) != 3 || r.Content[2].Type != "resource_link" || r.Content[2].MimeType != "application/x-ndjson" {
		t.Errorf("content %+v, want the header, a preview and an NDJSON link", r.Content)
	}
	if n := sp.Alive(); n != 0 {
		t.Errorf("%d bytes still spilled once the answer was stored", n)
	}
}

// An answer past MaxJQAnswer stops at the last whole output, and its
// header says so.
func TestJQLongAnswerBound(t *testing.T) {
	e, _ := spoolEnv(t, arttools.Limits{MaxAnswer: 1 << 10, MaxJQAnswer: 100 << 10})
	a := e.publish(t, "acme", "application/json", []byte(`"`+strings.Repeat("z", 999)+`"`))
	reply := e.callTool(t, Request{Tenant: "acme"}, arttools.JQ, map[string]any{"uri": artifact.URI(a.ID), "program": "range(1000) as $i | .", "maxOutputs": 1000})
	text, _ := toolText(t, reply)
	got := e.fullAnswer(t, reply)
	line := `"` + strings.Repeat("z", 999) + `"` + "\n"
	if want := strings.Repeat(line, (100<<10)/len(line)); got != want || !strings.Contains(text, fmt.Sprintf(": %d output(s) (stopped at 102400 bytes of output, the most an answer holds; more follow)", (100<<10)/len(line))) {
		t.Errorf("%d bytes stored (want %d), answer %.300q", len(got), len(want), text)
	}
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
