package policy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/spillway-dev/spillway/policy/decision"
)

// ErrEval is wrapped by every evaluation failure; the decision returned with
// it is the zero value, which denies. A decision whose context was
// cancelled wraps context.Canceled too.
var ErrEval = errors.New("policy: evaluation failed")

// Options configure an Engine. The zero value uses the built-in policy.
type Options struct {
	// Dir is a folder of .rego files and data.json/data.yaml documents;
	// "" with Bundle "" is the built-in policy.
	Dir string
	// Bundle is an OPA bundle (.tar.gz), verified with BundleKey when set.
	Bundle string
	// BundleKey is a file holding the PEM public key (or HMAC secret) that
	// signed Bundle; BundleKeyID names it as the bundle's signature does
	// ("default" if empty), BundleAlg is its algorithm (default RS256).
	// With a key, New fails unless Bundle is set and the key file exists,
	// and a reload refuses an older signed revision (see Reload).
	BundleKey, BundleKeyID, BundleAlg string
	// Candidate is a policy folder evaluated beside the enforced one in
	// dry-run: disagreements are logged, never enforced.
	Candidate string
	// DecisionLog receives one JSON line per decision; nil = off. Lines
	// are written from a queue on their own goroutine, so a slow or failing
	// writer never delays a decision: when the queue is full a line is
	// dropped, and drops and write errors are counted (WriteMetrics).
	// Close flushes the queue.
	DecisionLog io.Writer
	// DecisionLogQueue is how many lines may wait for the writer (default
	// 4096; at most 16 MiB in all).
	DecisionLogQueue int
	// DecisionLogFlush bounds how long Close waits for the writer to
	// take the queued lines (default 5 s).
	DecisionLogFlush time.Duration
	// DecisionTimeout bounds each evaluation (a decision, its dry-run
	// comparison, its decision log mask): past it the evaluation is
	// stopped and the decision denies with ErrDeadline, as on any
	// evaluation error. Default DefaultDecisionTimeout.
	DecisionTimeout time.Duration
	// PollInterval is how often Watch looks for changes; default 1s.
	PollInterval time.Duration
	// Logger receives the engine's own messages (reloads, refusals,
	// failed decisions); nil means slog.Default().
	Logger *slog.Logger

	// afterRead, when set (tests only), runs once the policy's files are
	// read, before they are compiled.
	afterRead func()
}

// Engine evaluates the offload, mint, fetch and call decisions with
// prepared queries, and swaps in a new policy atomically when its sources change.
// Safe for concurrent use.
type Engine struct {
	o   Options
	log *slog.Logger
	cur atomic.Pointer[compiled]
	dry atomic.Pointer[compiled] // the dry-run candidate, if any

	dlog *decisionLog // nil without Options.DecisionLog

	reloading sync.Mutex // one Reload at a time: swaps stay in order

	mu        sync.Mutex
	past      map[string]string // signed bundles once active: digest → revision
	pastRevs  map[string]bool
	lastErr   error
	lastPrint string // fingerprint of the files the active policy was read from
	dryPrint  string // the same for the candidate
	dryErr    error  // why the newest candidate was refused
	reloads   int64
	refusals  int64
	evalErrs  atomic.Int64
	loadedAt  time.Time

	evalCancelled atomic.Int64
	evalTimeouts  atomic.Int64

	decisionSeconds *decisionTimer // see metrics.go
}

// compiled is one policy ready to evaluate: its prepared queries and
// what names it. It is never changed once built, so a decision reads the
// one it loaded while a reload swaps in another.
type compiled struct {
	revision, digest           string
	fetch, offload, mint, call rego.PreparedEvalQuery
	mask                       *rego.PreparedEvalQuery // data.system.log.mask, when defined
	builtin                    bool                    // the embedded policy: Fetch and Call decide natively
	definesCall                bool                    // false: call is the constant allowCall
}

// New loads the policy named by o, runs its Rego tests (the built-in
// policy's too) and compiles it: a policy whose tests fail is refused.
// With o.Candidate, the dry-run candidate is loaded the same way.
func New(ctx context.Context, o Options) (*Engine, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.DecisionTimeout <= 0 {
		o.DecisionTimeout = DefaultDecisionTimeout
	}
	if err := checkBundleKey(o); err != nil {
		return nil, err
	}
	e := &Engine{o: o, log: o.Logger, past: map[string]string{}, pastRevs: map[string]bool{},
		decisionSeconds: newDecisionTimer()}
	c, fp, err := e.build(ctx, o.Dir, o.Bundle)
	if err != nil {
		return nil, err
	}
	e.cur.Store(c)
	e.lastPrint, e.loadedAt = fp, time.Now()
	if o.Candidate != "" {
		d, fp, err := e.build(ctx, o.Candidate, "")
		if err != nil {
			return nil, fmt.Errorf("dry-run candidate: %w", err)
		}
		e.dry.Store(d)
		e.dryPrint = fp
	}
	if o.DecisionLog != nil {
		e.dlog = newDecisionLog(o.DecisionLog, o.DecisionLogQueue, o.DecisionLogFlush, e.log)
	}
	e.log.Info("policy active", "revision", c.revision, "source", describe(o))
	return e, nil
}

// checkBundleKey fails closed: a key that cannot be enforced is a
// configuration error, never a silent no-op.
func checkBundleKey(o Options) error {
	if o.BundleKey == "" {
		return nil
	}
	if o.Bundle == "" {
		return fmt.Errorf("policy: a bundle key is set but the policy %q is not a bundle (.tar.gz): its signature could not be checked", describe(o))
	}
	key, err := os.ReadFile(o.BundleKey)
	if err != nil {
		return fmt.Errorf("policy: bundle key: %w", err)
	}
	if len(bytes.TrimSpace(key)) == 0 {
		return fmt.Errorf("policy: bundle key %s is empty", o.BundleKey)
	}
	return nil
}

// describe names the policy o selects in a message: its bundle, its
// folder, or "built-in".
func describe(o Options) string {
	switch {
	case o.Bundle != "":
		return o.Bundle
	case o.Dir != "":
		return o.Dir
	}
	return "built-in"
}

// build loads, tests and compiles one policy. It returns the fingerprint
// of its files taken before they were read: a change written while they
// are read or compiled makes the next poll's fingerprint differ, so it is
// loaded then, never lost (a fingerprint taken after reading would match
// the newer files while the older ones are in force). The fingerprint is
// returned with a load error too, so a refused version is not retried
// until it changes again.
func (e *Engine) build(ctx context.Context, dir, bundle string) (*compiled, string, error) {
	fp, err := fingerprint(dir, bundle)
	if err != nil {
		return nil, fp, fmt.Errorf("policy: load: %w", err)
	}
	src, err := load(dir, bundle, e.o)
	if err != nil {
		return nil, fp, fmt.Errorf("policy: load: %w", err)
	}
	if err := src.test(ctx); err != nil {
		return nil, fp, fmt.Errorf("policy: %w", err)
	}
	c, err := src.compile(ctx)
	if err != nil {
		return nil, fp, fmt.Errorf("policy: compile: %w", err)
	}
	return c, fp, nil
}

// allowCall is the call decision of a policy that defines no call rule
// (see Engine.Call), as a Rego query: it is evaluated, logged and compared
// with a dry-run candidate like any decision.
const allowCall = `{"allow": true}`

// compile prepares the policy's queries (fetch, offload, mint, call, and
// the decision log's mask when the policy defines one) in the sandbox of
// Capabilities. A policy that defines no call rule gets allowCall.
func (s *source) compile(ctx context.Context) (*compiled, error) {
	caps := Capabilities()
	prep := func(q string) (rego.PreparedEvalQuery, error) {
		opts := []func(*rego.Rego){rego.Query(q), rego.Capabilities(caps), rego.StrictBuiltinErrors(true), rego.Store(s.store)}
		for _, m := range s.modules {
			opts = append(opts, rego.ParsedModule(m))
		}
		return rego.New(opts...).PrepareForEval(ctx)
	}
	c := &compiled{revision: s.revision, digest: s.digest, builtin: s.builtin, definesCall: s.definesCall}
	callQuery := allowCall
	if s.definesCall {
		callQuery = callPath.String()
	}
	var err error
	for q, dst := range map[string]*rego.PreparedEvalQuery{
		"data.spillway.fetch": &c.fetch, "data.spillway.offload": &c.offload, "data.spillway.mint": &c.mint, callQuery: &c.call,
	} {
		if *dst, err = prep(q); err != nil {
			return nil, err
		}
	}
	if s.definesMask() {
		m, err := prep("data.system.log.mask")
		if err != nil {
			return nil, err
		}
		c.mask = &m
	}
	return c, nil
}

// Fetch evaluates data.spillway.fetch. An error comes with a denying decision.
// The built-in policy's fetch rule is decided in Go (builtinFetch) unless
// decisions are logged or compared with a dry-run candidate: on a small
// cached fetch, building the OPA input and evaluating it cost about as much
// CPU as the rest of the request together.
func (e *Engine) Fetch(ctx context.Context, in FetchInput) (FetchDecision, error) {
	start := time.Now()
	d, err := e.fetch(ctx, in)
	e.decided(pointFetch, start, d.Allow, err)
	traced(ctx, pointFetch, start, d.Allow, err)
	return d, err
}

func (e *Engine) fetch(ctx context.Context, in FetchInput) (FetchDecision, error) {
	if e.cur.Load().builtin && e.dlog == nil && e.dry.Load() == nil {
		recordID(ctx, "")
		return builtinFetch(in), nil
	}
	return eval[FetchDecision](ctx, e, "fetch", func(c *compiled) rego.PreparedEvalQuery { return c.fetch }, fetchInput(in))
}

// Offload evaluates data.spillway.offload. An error keeps content inline.
func (e *Engine) Offload(ctx context.Context, in OffloadInput) (OffloadDecision, error) {
	start := time.Now()
	d, err := eval[OffloadDecision](ctx, e, "offload", func(c *compiled) rego.PreparedEvalQuery { return c.offload }, offloadInput(in))
	e.decided(pointOffload, start, d.Offload, err)
	traced(ctx, pointOffload, start, d.Offload, err)
	return d, err
}

// Mint evaluates data.spillway.mint. An error comes with a denying decision.
func (e *Engine) Mint(ctx context.Context, in MintInput) (MintDecision, error) {
	start := time.Now()
	d, err := eval[MintDecision](ctx, e, "mint", func(c *compiled) rego.PreparedEvalQuery { return c.mint }, mintInput(in))
	e.decided(pointMint, start, d.Allow, err)
	traced(ctx, pointMint, start, d.Allow, err)
	return d, err
}

// Call evaluates data.spillway.call: may in.Tenant's request reach
// in.Upstream (a tools/call, prompts/get or resources/read), or, with
// in.Listing, may the tool be listed to in.Tenant. A denial is a decision
// (Allow false, with the Reason to tell the client); an error (evaluation
// failed, passed its deadline, arguments that are not JSON, or a decision
// of the wrong shape) comes with the zero decision, which denies, and the
// caller must refuse the request.
//
// A policy that does not define data.spillway.call at all (no rule named
// call in package spillway, nothing at or under data.spillway.call) allows
// every call: policies written before this decision existed keep working.
// That is the one place an absent decision does not deny. A policy that
// does define it is held to it like the other decisions: where its rules
// leave the decision undefined for an input (no default and no rule
// matched), the call is refused with an error. The built-in policy allows
// every call (default call := {"allow": true}).
func (e *Engine) Call(ctx context.Context, in CallInput) (CallDecision, error) {
	start := time.Now()
	d, err := e.call(ctx, in)
	e.decided(pointCall, start, d.Allow, err)
	traced(ctx, pointCall, start, d.Allow, err)
	return d, err
}

func (e *Engine) call(ctx context.Context, in CallInput) (CallDecision, error) {
	if c := e.cur.Load(); (c.builtin || !c.definesCall) && e.dlog == nil && e.dry.Load() == nil {
		recordID(ctx, "")
		return builtinCall(in), nil // what the query would say, without building the input
	}
	return eval[CallDecision](ctx, e, "call", func(c *compiled) rego.PreparedEvalQuery { return c.call }, callInput(in))
}

// input is a decision's input document; see input.go.
type input interface{ value() (ast.Value, error) }

// noMetrics spares each evaluation a fresh metrics registry nobody reads.
var noMetrics = metrics.NoOp()

// evalOne evaluates the prepared query pq on in and returns its one
// result as JSON; an undefined decision is an error.
func evalOne(ctx context.Context, pq rego.PreparedEvalQuery, in input) (json.RawMessage, error) {
	v, err := in.value()
	if err != nil {
		return nil, err
	}
	rs, err := pq.Eval(ctx, rego.EvalParsedInput(v), rego.EvalMetrics(noMetrics))
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return nil, errors.New("decision undefined")
	}
	return json.Marshal(rs[0].Expressions[0].Value)
}

// eval evaluates the decision point with the enforced policy, within the
// decision deadline, logs it and compares it with the dry-run candidate
// when either is on, and returns the decision. On any failure it returns
// the zero T, which denies, and an error wrapping ErrEval (and ErrDeadline
// when the deadline passed), counted by its cause.
func eval[T any](ctx context.Context, e *Engine, point string, pq func(*compiled) rego.PreparedEvalQuery, in input) (T, error) {
	var zero T
	c := e.cur.Load()
	start := time.Now()
	dctx, cancel := e.withDeadline(ctx)
	raw, err := evalOne(dctx, pq(c), in)
	late := errors.Is(context.Cause(dctx), ErrDeadline)
	cancel()
	took := time.Since(start)
	var d T
	if err == nil {
		if uerr := json.Unmarshal(raw, &d); uerr != nil {
			err = fmt.Errorf("decision has the wrong shape: %w", uerr)
		}
	}
	id := ""
	if e.dlog != nil || e.dry.Load() != nil {
		id = newID()
		e.record(ctx, c, id, point, pq, in, raw, err, took)
	}
	recordID(ctx, id)
	if err != nil {
		// A caller that left (a client disconnected) cancels its decision:
		// it still denies, but says nothing about the policy, so it is
		// counted apart from evaluation errors, which alert on a broken one.
		if cerr := ctx.Err(); errors.Is(cerr, context.Canceled) {
			e.evalCancelled.Add(1)
			e.log.Debug("policy decision cancelled by its caller; denying", "point", point, "revision", c.revision)
			return zero, fmt.Errorf("%w: %s: %w", ErrEval, point, cerr)
		}
		if late {
			e.evalTimeouts.Add(1)
			e.log.Warn("policy decision passed its deadline; denying", "point", point, "revision", c.revision, "deadline", e.o.DecisionTimeout)
			return zero, fmt.Errorf("%w: %s: %w (%v)", ErrEval, point, ErrDeadline, e.o.DecisionTimeout)
		}
		e.evalErrs.Add(1)
		e.log.Warn("policy decision failed; denying", "point", point, "revision", c.revision, "err", err)
		return zero, fmt.Errorf("%w: %s: %w", ErrEval, point, err)
	}
	return d, nil
}

// record writes the decision log line and compares with the dry-run
// candidate.
func (e *Engine) record(ctx context.Context, c *compiled, id, point string, pq func(*compiled) rego.PreparedEvalQuery, in input, result json.RawMessage, err error, took time.Duration) {
	inDoc, _ := json.Marshal(in)
	var input any
	json.Unmarshal(inDoc, &input)
	entry := map[string]any{
		"decision_id": id, "time": time.Now().UTC().Format(time.RFC3339Nano), "point": point,
		"revision": c.revision, "digest": c.digest[:16], "input": input, "eval_ns": took.Nanoseconds(),
	}
	if err != nil {
		entry["error"] = err.Error()
	} else {
		var r any
		json.Unmarshal(result, &r)
		entry["result"] = r
	}
	if dry := e.dry.Load(); dry != nil {
		dctx, cancel := e.withDeadline(ctx)
		got, derr := evalOne(dctx, pq(dry), in)
		cancel()
		if derr != nil || !jsonEqual(got, result) {
			cand := map[string]any{"revision": dry.revision}
			if derr != nil {
				cand["error"] = derr.Error()
			} else {
				var r any
				json.Unmarshal(got, &r)
				cand["result"] = r
			}
			entry["dry_run_disagreement"] = cand
			e.log.Info("dry-run policy disagrees", "point", point, "enforced", c.revision, "candidate", dry.revision)
		}
	}
	if e.dlog == nil {
		return
	}
	mctx, cancel := e.withDeadline(ctx)
	mask(mctx, c, entry)
	cancel()
	line, merr := json.Marshal(entry)
	if merr != nil {
		e.dlog.dropped.Add(1)
		return
	}
	e.dlog.enqueue(append(line, '\n'))
}

// jsonEqual reports whether a and b are the same JSON value, whatever
// their spacing and member order.
func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// recordID hands the id of the decision just made to the caller that
// asked for it (decision.WithRecorder): id, the decision log line's, or a
// fresh one when the decision was not logged. Without a Recorder in ctx
// it makes no id.
func recordID(ctx context.Context, id string) {
	r := decision.RecorderFrom(ctx)
	if r == nil {
		return
	}
	if id == "" {
		id = newID()
	}
	r.Set(id)
}

// newID is a random decision id: 32 hex digits.
func newID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Status is what /readyz and /metrics report about the policy.
type Status struct {
	Revision string `json:"revision"`
	// Digest identifies the active modules and data (two bundles may carry
	// the same revision).
	Digest     string    `json:"digest"`
	LoadedAt   time.Time `json:"loaded_at"`
	Reloads    int64     `json:"reloads"`
	Refusals   int64     `json:"refusals"`
	EvalErrors int64     `json:"eval_errors"`
	// EvalCancelled counts decisions cancelled by their caller (a client
	// that left): they denied, but are not evaluation errors.
	EvalCancelled int64 `json:"eval_cancelled"`
	// EvalTimeouts counts decisions that passed Options.DecisionTimeout
	// (and denied); they are not counted in EvalErrors.
	EvalTimeouts int64 `json:"eval_timeouts"`
	// LastError is why the newest policy was refused; "" when the newest
	// one is active.
	LastError string `json:"last_error,omitempty"`
	// DecisionLogDropped counts decision log lines dropped (queue full,
	// or not flushed at Close); DecisionLogWriteErrors failed writes.
	DecisionLogDropped     int64 `json:"decision_log_dropped,omitempty"`
	DecisionLogWriteErrors int64 `json:"decision_log_write_errors,omitempty"`
	// CandidateRevision is the dry-run candidate's, "" without one;
	// CandidateError is why its newest version was refused.
	CandidateRevision string `json:"candidate_revision,omitempty"`
	CandidateError    string `json:"candidate_error,omitempty"`
}

// Status reports the active revision and the reload history.
func (e *Engine) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.cur.Load()
	s := Status{Revision: c.revision, Digest: c.digest[:16], LoadedAt: e.loadedAt, Reloads: e.reloads,
		Refusals: e.refusals, EvalErrors: e.evalErrs.Load(), EvalCancelled: e.evalCancelled.Load(), EvalTimeouts: e.evalTimeouts.Load()}
	if e.lastErr != nil {
		s.LastError = e.lastErr.Error()
	}
	if e.dlog != nil {
		s.DecisionLogDropped, s.DecisionLogWriteErrors = e.dlog.dropped.Load(), e.dlog.errs.Load()
	}
	if d := e.dry.Load(); d != nil {
		s.CandidateRevision = d.revision
	}
	if e.dryErr != nil {
		s.CandidateError = e.dryErr.Error()
	}
	return s
}

// Ready reports whether a good policy is active. A refused reload does
// not make the engine unready: the last good policy keeps serving, and
// Status says what was refused.
func (e *Engine) Ready() error {
	if e.cur.Load() == nil {
		return errors.New("no policy")
	}
	return nil
}

// Revision identifies the active policy's sources.
func (e *Engine) Revision() string { return e.cur.Load().revision }

// Watch polls the policy folder or bundle, and the dry-run candidate,
// until ctx is done. A change is loaded, tested and compiled off the
// request path, then swapped in; a policy that fails any step is refused
// and the last good one serves on. The built-in policy never changes.
func (e *Engine) Watch(ctx context.Context) {
	if e.o.Dir == "" && e.o.Bundle == "" && e.o.Candidate == "" {
		return
	}
	t := time.NewTicker(e.o.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.Reload(ctx)
		}
	}
}

// Reload loads the policy, and the dry-run candidate, again if their files
// changed. It reports whether a new enforced policy was swapped in. A
// policy whose content changed is swapped in whatever its revision says.
// With a bundle key, a signed bundle that is older than the active one is
// refused (see refuseOlder). A refused candidate leaves the last good one
// comparing (Status.CandidateError says why).
func (e *Engine) Reload(ctx context.Context) bool {
	e.reloading.Lock()
	defer e.reloading.Unlock()
	swapped := e.reloadEnforced(ctx)
	if e.o.Candidate != "" {
		e.reloadCandidate(ctx)
	}
	return swapped
}

// changed reports whether the files of a policy differ from those it was
// last read from.
func (e *Engine) changed(dir, bundle string, last *string) bool {
	fp, _ := fingerprint(dir, bundle) // an error is part of fp
	e.mu.Lock()
	defer e.mu.Unlock()
	return fp != *last
}

// reloadEnforced loads the enforced policy again if its files changed and
// reports whether a new one now serves. A policy that fails to load, its
// tests, or (signed) the check against older revisions is refused, and
// the last good one keeps serving.
func (e *Engine) reloadEnforced(ctx context.Context) bool {
	if !e.changed(e.o.Dir, e.o.Bundle, &e.lastPrint) {
		return false
	}
	c, fp, err := e.build(ctx, e.o.Dir, e.o.Bundle)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lastPrint = fp // a refused version is not retried until it changes again
	cur := e.cur.Load()
	if err == nil && e.o.BundleKey != "" {
		err = e.refuseOlder(cur, c)
	}
	if err != nil {
		e.refusals++
		e.lastErr = err
		e.log.Error("policy refused; the last good one keeps serving", "active", cur.revision, "err", err)
		return false
	}
	e.lastErr = nil
	if c.digest == cur.digest {
		return false
	}
	e.past[cur.digest] = cur.revision
	e.pastRevs[cur.revision] = true
	e.cur.Store(c)
	e.reloads++
	e.loadedAt = time.Now()
	e.log.Info("policy reloaded", "revision", c.revision, "digest", c.digest[:16])
	return true
}

// reloadCandidate loads the dry-run candidate again if its files changed;
// a refused one leaves the last good candidate in place.
func (e *Engine) reloadCandidate(ctx context.Context) {
	if !e.changed(e.o.Candidate, "", &e.dryPrint) {
		return
	}
	c, fp, err := e.build(ctx, e.o.Candidate, "")
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dryPrint = fp
	e.dryErr = err
	if err != nil {
		e.log.Error("dry-run candidate refused; the last good one keeps comparing", "candidate", e.dry.Load().revision, "err", err)
		return
	}
	if c.digest != e.dry.Load().digest {
		e.dry.Store(c)
		e.log.Info("dry-run candidate reloaded", "revision", c.revision, "digest", c.digest[:16])
	}
}

// refuseOlder says why a signed bundle must not replace the active one:
// it is a replay of a bundle that was active earlier in this process, or
// its revision was, or both revisions are decimal numbers (a build number,
// a Unix time) and its is lower. Without that convention, ordering is only
// known for revisions this process has seen. Called with e.mu held.
func (e *Engine) refuseOlder(cur, c *compiled) error {
	if c.digest == cur.digest {
		return nil
	}
	if rev, ok := e.past[c.digest]; ok {
		return fmt.Errorf("policy: bundle revision %q is a replay of one active earlier (revision %q); publish a rollback under a new revision", c.revision, rev)
	}
	if c.revision != cur.revision && e.pastRevs[c.revision] {
		return fmt.Errorf("policy: bundle revision %q was active before %q: an older revision is refused; publish a rollback under a new revision", c.revision, cur.revision)
	}
	if n, ok := decimal(c.revision); ok {
		if m, ok := decimal(cur.revision); ok && n < m {
			return fmt.Errorf("policy: bundle revision %s is older than the active %s", c.revision, cur.revision)
		}
	}
	return nil
}

// decimal parses a revision made of decimal digits only.
func decimal(rev string) (uint64, bool) {
	n, err := strconv.ParseUint(rev, 10, 64)
	return n, err == nil
}

// Close flushes the decision log (see Options.DecisionLogFlush); the
// engine must not be used afterwards.
func (e *Engine) Close() error {
	if e.dlog == nil {
		return nil
	}
	return e.dlog.Close()
}
