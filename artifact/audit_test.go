package artifact

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact/token"
	"github.com/spillway-dev/spillway/policy"
	"github.com/spillway-dev/spillway/policy/decision"
	"github.com/spillway-dev/spillway/policy/policytest"
)

// TestAuditTrail: an offload and every read of its link, allowed (whole,
// a range, the token in a header) or refused (revoked, expired), each
// write one audit line naming the artifact and the call that produced it;
// each names the decision log line of its decision; none carries a token.
func TestAuditTrail(t *testing.T) {
	f := newFixture(t)
	var audit, dlog policytest.Buffer
	eng, err := policy.New(t.Context(), policy.Options{Logger: slog.New(slog.DiscardHandler), DecisionLog: &dlog})
	if err != nil {
		t.Fatal(err)
	}
	f.svc.Fetch, f.svc.Mint = eng, eng
	f.svc.Audit = slog.New(slog.NewJSONHandler(&audit, nil))

	call := Call{Upstream: "bigtool", Tool: "big_json", RequestID: `"req-1"`, Session: "s1",
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7"}
	body := bytes.Repeat([]byte("z"), 5000)
	mctx, mint := decision.WithRecorder(t.Context())
	a, l, err := f.svc.Publish(mctx, Artifact{MimeType: "text/plain", Call: call}, bytes.NewReader(body), LinkOptions{Source: "offload"})
	if err != nil {
		t.Fatal(err)
	}
	f.svc.AuditOffload(t.Context(), a, l, OffloadEvent{Kind: "text", OffloadDecision: "od", MintDecision: mint.ID()})
	u, _ := url.Parse(l.URL)
	tok := u.Query().Get("t")
	bare := f.srv.URL + u.Path

	steps := []struct {
		hdr          map[string]string
		status       int
		bytes        int64
		rng, denial  string
		wantDecision bool
	}{
		{nil, 200, 5000, "", "", true},
		{map[string]string{"Range": "bytes=10-19"}, 206, 10, "bytes=10-19", "", true},
		{map[string]string{"Authorization": "Bearer " + tok}, 200, 5000, "", "", true},
		{nil, 403, 0, "", "link revoked", false},
		{nil, 410, 0, "", "link expired", false},
	}
	for i, st := range steps {
		switch i {
		case 3:
			if err := f.svc.Revoke(t.Context(), "", a.ID, l.TokenID); err != nil {
				t.Fatal(err)
			}
		case 4:
			f.now = l.Expires.Add(time.Second) // the link expires, the artifact not yet
			a2, l2, err := f.svc.Publish(t.Context(), Artifact{MimeType: "text/plain", Call: call}, bytes.NewReader(body), LinkOptions{TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			f.now = l2.Expires.Add(time.Second)
			a, l = a2, l2
			u, _ = url.Parse(l.URL)
			bare = f.srv.URL + u.Path
		}
		target := bare + "?" + u.RawQuery
		if st.hdr["Authorization"] != "" {
			target = bare
		}
		resp, got := get(t, http.MethodGet, target, st.hdr)
		if resp.StatusCode != st.status || (st.status < 300 && int64(len(got)) != st.bytes) {
			t.Fatalf("step %d: %s, %d bytes", i, resp.Status, len(got))
		}
		audit.Lines(t, 2+i) // written once the response is out: wait, to keep the steps' order
	}

	lines := audit.Lines(t, 1+len(steps))
	if err := eng.Close(); err != nil { // flushes the decision log
		t.Fatal(err)
	}
	logged := map[string]string{} // decision_id → point
	for _, l := range strings.Split(strings.TrimSpace(dlog.String()), "\n") {
		var m struct{ DecisionID, Point string }
		json.Unmarshal([]byte(strings.ReplaceAll(l, `"decision_id"`, `"decisionid"`)), &m)
		logged[m.DecisionID] = m.Point
	}
	if len(lines) != 1+len(steps) {
		t.Fatalf("%d audit lines, want %d:\n%s", len(lines), 1+len(steps), audit.String())
	}
	off := lines[0]
	if off["msg"] != AuditOffloadMsg || off["kind"] != "text" || off["size"] != 5000.0 || off["sha256"] != a.SHA256 ||
		off["upstream"] != "bigtool" || off["trace_id"] != call.TraceID || logged[off["mint_decision"].(string)] != "mint" {
		t.Errorf("offload line %v", off)
	}
	for i, st := range steps {
		l := lines[1+i]
		if l["msg"] != AuditFetchMsg || l["via"] != ViaLink || l["status"] != float64(st.status) ||
			l["range"] != st.rng || l["denial"] != st.denial || l["source"] != "127.0.0.1" ||
			l["call_upstream"] != call.Upstream || l["call_tool"] != call.Tool || l["call_request_id"] != call.RequestID ||
			l["call_trace_id"] != call.TraceID || l["token_id"] == "" {
			t.Errorf("step %d: fetch line %v", i, l)
		}
		if l["bytes"] != float64(st.bytes) {
			t.Errorf("step %d: bytes %v, want %d", i, l["bytes"], st.bytes)
		}
		if id, _ := l["decision"].(string); (logged[id] == "fetch") != st.wantDecision {
			t.Errorf("step %d: decision %q (logged as %q), want one: %v", i, id, logged[id], st.wantDecision)
		}
	}
	if lines[1]["artifact"] != off["artifact"] || lines[4]["artifact"] != off["artifact"] || lines[5]["artifact"] != a.ID {
		t.Errorf("the lines do not name their artifact: %v", lines)
	}
	if strings.Contains(audit.String(), tok) || strings.Contains(audit.String(), u.Query().Get("t")) {
		t.Errorf("a token is in the audit trail:\n%s", audit.String())
	}
}

// TestAuditOff: without Service.Audit the endpoint notes nothing (no
// recorder in the decision's context) and writes no audit line.
func TestAuditOff(t *testing.T) {
	f := newFixture(t)
	var seen bool
	f.svc.Fetch = fetchFunc(func(ctx context.Context) { seen = decision.RecorderFrom(ctx) != nil })
	_, l := f.publish(t, []byte("x"), "text/plain", "", LinkOptions{})
	if resp, _ := get(t, http.MethodGet, l.URL, nil); resp.StatusCode != 200 || seen {
		t.Errorf("%s, recorder in context: %v", resp.Status, seen)
	}
	f.svc.AuditFetch(t.Context(), Artifact{}, FetchEvent{}) // nil Audit: a no-op, no panic
}

// fetchFunc allows every fetch after calling f with the decision's context.
type fetchFunc func(ctx context.Context)

func (f fetchFunc) Fetch(ctx context.Context, _ policy.FetchInput) (policy.FetchDecision, error) {
	f(ctx)
	return policy.FetchDecision{Allow: true}, nil
}

func TestDenial(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{&DeniedError{Reason: "not on weekends"}, "policy: not on weekends"},
		{&DeniedError{}, "policy: denied"},
		{&DeniedError{Err: errors.New("eval failed: secret input")}, "policy: no decision (evaluation failed)"},
		{fmt.Errorf("token x: %w: %w", errRevoked, ErrLinkRefused), "link revoked"},
		{fmt.Errorf("%w: %w", ErrLinkRefused, token.ErrInvalid), "link refused (malformed, tampered, retired key or bindings)"},
		{fmt.Errorf("stat: %w", ErrNotFound), "not_found"},
		{fmt.Errorf("stat: %w", ErrExpired), "expired"},
	} {
		if got := denial(tt.err); got != tt.want {
			t.Errorf("denial(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
