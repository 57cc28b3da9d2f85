package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/bundle"
)

var ctx = context.Background()

func fetchIn(method, tenant string) FetchInput {
	return FetchInput{
		Request:  Request{Method: method, Path: []string{"a", "x"}, Headers: map[string][]string{"authorization": {"Bearer secret"}, "x-secret": {"s"}, "accept": {"*/*"}}},
		Token:    &TokenClaims{Method: "GET", Tenant: tenant},
		Artifact: ArtifactInfo{ID: "x", Tenant: tenant, MimeType: "text/plain"},
	}
}

func TestDefaultPolicy(t *testing.T) {
	e, err := New(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := e.Offload(ctx, OffloadInput{Kind: "text", Size: 20000}); err != nil || !d.Offload || d.TTLSeconds > 3600 {
		t.Errorf("offload 20 KB text: %+v %v", d, err)
	}
	if d, _ := e.Offload(ctx, OffloadInput{Kind: "text", Size: 100}); d.Offload {
		t.Error("100 bytes of text offloaded")
	}
	if d, err := e.Fetch(ctx, fetchIn("GET", "a")); err != nil || !d.Allow {
		t.Errorf("fetch with a valid token: %+v %v", d, err)
	}
	in := fetchIn("GET", "a")
	in.Artifact.Tenant = "b"
	if d, _ := e.Fetch(ctx, in); d.Allow {
		t.Error("a token for tenant a fetched tenant b's artifact")
	}
	if d, err := e.Mint(ctx, MintInput{RequestedTTLSeconds: 99999}); err != nil || !d.Allow || d.MaxTTLSeconds > 3600 {
		t.Errorf("mint: %+v %v", d, err)
	}
}

func writePolicy(t *testing.T, dir, rego string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "p.rego"), []byte(rego), 0o644); err != nil {
		t.Fatal(err)
	}
	// Poll by mtime: make sure a rewrite within the same tick is seen.
	future := time.Now().Add(time.Duration(len(rego)) * time.Millisecond)
	os.Chtimes(filepath.Join(dir, "p.rego"), future, future)
}

const allowAll = `package spillway
fetch := {"allow": true}
offload := {"offload": false}
mint := {"allow": true}
`

const denyAll = `package spillway
fetch := {"allow": false, "reason": "v2"}
offload := {"offload": false}
mint := {"allow": false}
`

func TestReloadSwapsAndRefuses(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, allowAll)
	e, err := New(ctx, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	rev1 := e.Revision()

	// Concurrent decisions while the policy changes under them (-race).
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := e.Fetch(ctx, fetchIn("GET", "")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range 6 {
		writePolicy(t, dir, []string{denyAll, allowAll}[i%2]+strings.Repeat("\n", i))
		if !e.Reload(ctx) {
			t.Fatalf("reload %d did not swap", i)
		}
	}
	close(stop)
	wg.Wait()
	if d, _ := e.Fetch(ctx, fetchIn("GET", "")); !d.Allow {
		t.Error("the last reload (allow) is not in force")
	}

	// A policy that does not compile is refused; the last good one serves.
	good := e.Revision()
	writePolicy(t, dir, "package spillway\nfetch := {")
	if e.Reload(ctx) {
		t.Fatal("a broken policy was swapped in")
	}
	st := e.Status()
	if st.Revision != good || st.LastError == "" || st.Refusals != 1 || e.Ready() != nil {
		t.Errorf("after a refused reload: %+v", st)
	}
	if d, err := e.Fetch(ctx, fetchIn("GET", "")); err != nil || !d.Allow {
		t.Errorf("the last good policy stopped serving: %+v %v", d, err)
	}

	// A policy whose own tests fail is refused too.
	os.WriteFile(filepath.Join(dir, "p_test.rego"), []byte("package spillway_test\nimport data.spillway\ntest_allows if spillway.fetch.allow\n"), 0o644)
	writePolicy(t, dir, denyAll)
	if e.Reload(ctx) || !strings.Contains(e.Status().LastError, "test") {
		t.Errorf("a policy failing its tests: %+v", e.Status())
	}
	writePolicy(t, dir, allowAll+"# fixed\n")
	if !e.Reload(ctx) || e.Status().LastError != "" || e.Revision() == rev1 {
		t.Errorf("a fixed policy is not taken: %+v", e.Status())
	}
	var m bytes.Buffer
	e.WriteMetrics(&m)
	if !strings.Contains(m.String(), "spillway_policy_reload_refusals_total 2") {
		t.Errorf("metrics:\n%s", m.String())
	}
}

func TestWatch(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, allowAll)
	e, err := New(ctx, Options{Dir: dir, PollInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go e.Watch(wctx)
	writePolicy(t, dir, denyAll)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if d, _ := e.Fetch(ctx, fetchIn("GET", "")); !d.Allow {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Watch never took the new policy")
		}
	}
}

func TestEvalErrorDenies(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, `package spillway
fetch := {"allow": to_number(input.request.method)}
offload := {"offload": true} if input.size > 1
mint := {"allow": true}
`)
	var log bytes.Buffer
	e, err := New(ctx, Options{Dir: dir, DecisionLog: &log})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Fetch(ctx, fetchIn("GET", ""))
	if !errors.Is(err, ErrEval) || d.Allow {
		t.Errorf("an evaluation error must deny: %+v %v", d, err)
	}
	od, err := e.Offload(ctx, OffloadInput{Size: 0}) // offload undefined
	if !errors.Is(err, ErrEval) || od.Offload {
		t.Errorf("an undefined decision must deny: %+v %v", od, err)
	}
	e.Close() // flushes the decision log
	if !strings.Contains(log.String(), `"error"`) || e.Status().EvalErrors != 2 {
		t.Errorf("decision log:\n%s", log.String())
	}
}

func TestDecisionLogMasks(t *testing.T) {
	dir := t.TempDir()
	writePolicy(t, dir, allowAll+`
`)
	os.WriteFile(filepath.Join(dir, "mask.rego"), []byte(`package system.log
mask contains "/input/request/headers/x-secret"
`), 0o644)
	var log bytes.Buffer
	e, err := New(ctx, Options{Dir: dir, DecisionLog: &log})
	if err != nil {
		t.Fatal(err)
	}
	e.Fetch(ctx, fetchIn("GET", "t1"))
	e.Close()
	var entry struct {
		DecisionID string         `json:"decision_id"`
		Point      string         `json:"point"`
		Revision   string         `json:"revision"`
		Input      FetchInput     `json:"input"`
		Result     map[string]any `json:"result"`
		EvalNS     int64          `json:"eval_ns"`
	}
	if err := json.Unmarshal(log.Bytes(), &entry); err != nil {
		t.Fatalf("%v: %s", err, log.String())
	}
	h := entry.Input.Request.Headers
	if entry.DecisionID == "" || entry.Point != "fetch" || entry.Revision != e.Revision() || entry.Result["allow"] != true || entry.EvalNS <= 0 {
		t.Errorf("entry: %+v", entry)
	}
	if h["authorization"] != nil || h["x-secret"] != nil || h["accept"] == nil {
		t.Errorf("headers after masking: %v", h)
	}
	if strings.Contains(log.String(), "Bearer secret") {
		t.Error("a credential reached the decision log")
	}
}

func TestDryRun(t *testing.T) {
	enforced, candidate := t.TempDir(), t.TempDir()
	writePolicy(t, enforced, allowAll)
	writePolicy(t, candidate, denyAll)
	var log bytes.Buffer
	e, err := New(ctx, Options{Dir: enforced, Candidate: candidate, DecisionLog: &log})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := e.Fetch(ctx, fetchIn("GET", "")); !d.Allow {
		t.Error("the dry-run candidate was enforced")
	}
	e.Close()
	if !strings.Contains(log.String(), `"dry_run_disagreement"`) || !strings.Contains(log.String(), `"v2"`) {
		t.Errorf("no disagreement logged:\n%s", log.String())
	}

	// The candidate is reloaded like the enforced policy: once it agrees,
	// nothing is logged; a broken one is refused and the last good one
	// keeps comparing.
	log.Reset()
	e, err = New(ctx, Options{Dir: enforced, Candidate: candidate, DecisionLog: &log})
	if err != nil {
		t.Fatal(err)
	}
	writePolicy(t, candidate, allowAll+"# agrees now\n")
	e.Reload(ctx)
	agreeing := e.Status().CandidateRevision
	writePolicy(t, candidate, "package spillway\nfetch := {")
	e.Reload(ctx)
	e.Fetch(ctx, fetchIn("GET", ""))
	e.Close()
	if st := e.Status(); st.CandidateRevision != agreeing || st.CandidateError == "" {
		t.Errorf("after a good then a broken candidate: %+v", st)
	}
	if strings.Contains(log.String(), `"dry_run_disagreement"`) {
		t.Errorf("the reloaded candidate agrees, yet a disagreement is logged:\n%s", log.String())
	}
}

func TestBundle(t *testing.T) {
	write := func(signed bool) string {
		var sc *bundle.SigningConfig
		if signed {
			sc = bundle.NewSigningConfig("bundle-secret-0123456789", "HS256", "")
		}
		return writeBundle(t, map[string]string{"p.rego": denyAll}, "r42", sc)
	}
	e, err := New(ctx, Options{Bundle: write(false)})
	if err != nil || e.Revision() != "r42" {
		t.Fatalf("bundle: %v, revision %q", err, e.Revision())
	}
	key := filepath.Join(t.TempDir(), "key")
	os.WriteFile(key, []byte("bundle-secret-0123456789"), 0o600)
	if _, err := New(ctx, Options{Bundle: write(true), BundleKey: key, BundleKeyID: "k", BundleAlg: "HS256"}); err != nil {
		t.Errorf("signed bundle: %v", err)
	}
	if _, err := New(ctx, Options{Bundle: write(false), BundleKey: key, BundleKeyID: "k", BundleAlg: "HS256"}); err == nil {
		t.Error("an unsigned bundle passed verification")
	}
	os.WriteFile(key, []byte("another-secret-000000000"), 0o600)
	if _, err := New(ctx, Options{Bundle: write(true), BundleKey: key, BundleKeyID: "k", BundleAlg: "HS256"}); err == nil {
		t.Error("a bundle signed with another key passed verification")
	}
}

// BenchmarkFetchDecision reports the mean (ns/op) and the median of single
// decisions (p50-ns) for the built-in and the example policies.
func BenchmarkFetchDecision(b *testing.B) {
	for name, dir := range map[string]string{"default": "", "hardened": "../examples/policies/hardened"} {
		b.Run(name, func(b *testing.B) {
			e, err := New(ctx, Options{Dir: dir, Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			in := fetchIn("GET", "t")
			in.Request.SourceAddress = "10.88.1.2"
			if d, err := e.Fetch(ctx, in); err != nil || !d.Allow {
				b.Fatalf("the benchmark's request is denied: %+v %v", d, err)
			}
			took := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				if _, err := e.Fetch(ctx, in); err != nil {
					b.Fatal(err)
				}
				if len(took) < cap(took) {
					took = append(took, time.Since(start))
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
		})
	}
}

// A client that disconnects during a decision cancels its request's
// context: the decision denies, and is counted as cancelled, not as an
// evaluation error (which alerts on a broken policy). The client is real,
// on loopback, and leaves while the policy is evaluating.
func TestCancelledDecision(t *testing.T) {
	dir := t.TempDir()
	// A minute of small evaluation steps (OPA checks for cancellation
	// between steps), holding no more than two short arrays (MaxRange
	// numbers each); no decision deadline in the way.
	writePolicy(t, dir, `package spillway
slow if {
	some i in numbers.range(1, input.now)
	some j in numbers.range(1, input.now)
	i * j == -1
}
fetch := {"allow": true} if not slow
offload := {"offload": false}
mint := {"allow": true}
`)
	e, err := New(ctx, Options{Dir: dir, Logger: quiet, DecisionTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		d   FetchDecision
		err error
	}
	started, done := make(chan struct{}), make(chan result, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in := fetchIn("GET", "")
		in.Now = MaxRange
		close(started)
		d, err := e.Fetch(r.Context(), in)
		done <- result{d, err}
	}))
	defer srv.Close()
	cctx, cancel := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(cctx, "GET", srv.URL, nil)
	go func() {
		<-started
		cancel() // the client leaves: its connection is closed
	}()
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("the request completed")
	}
	var r result
	select {
	case r = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the decision went on after its client left")
	}
	if r.d.Allow || !errors.Is(r.err, ErrEval) || !errors.Is(r.err, context.Canceled) {
		t.Errorf("a cancelled decision: %+v %v, want a denial wrapping ErrEval and context.Canceled", r.d, r.err)
	}
	var m bytes.Buffer
	e.WriteMetrics(&m)
	if st := e.Status(); st.EvalErrors != 0 || st.EvalCancelled != 1 || !strings.Contains(m.String(), "spillway_policy_eval_cancelled_total 1") {
		t.Errorf("after a cancelled decision: %+v\n%s", st, m.String())
	}
}
