package policy

import (
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillway-dev/spillway/artifact/promtext"
)

// decisionBuckets (seconds) bound a decision's latency: from 10 µs (the
// built-in fetch and call rules, decided in Go) through the 100 µs to
// 1 ms a prepared Rego query takes, to 1 s (DefaultDecisionTimeout, past
// which a decision is stopped and denies), about two and a half per decade.
var decisionBuckets = []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// The decision points and results, the label values of
// spillway_policy_decision_duration_seconds; a point's constant is its
// index in decisionPoints.
var (
	decisionPoints  = []string{"offload", "mint", "fetch", "call"}
	decisionResults = []string{"allow", "deny", "error"}
)

const (
	pointOffload = iota
	pointMint
	pointFetch
	pointCall
)

// decisionTimer is the decision latency histogram with its series looked
// up once: a built-in fetch decision takes about 100 ns, which hashing
// two label values on each would double.
type decisionTimer struct {
	vec *prometheus.HistogramVec
	obs [4][3]prometheus.Observer // by point, then result (decisionResults)
}

func newDecisionTimer() *decisionTimer {
	t := &decisionTimer{vec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "spillway_policy_decision_duration_seconds",
		Help:    "Time to take one policy decision, by decision point and result (allow, deny, or error, which denies; for offload, allow means offloaded).",
		Buckets: decisionBuckets,
	}, []string{"decision", "result"})}
	for i, p := range decisionPoints {
		for j, r := range decisionResults {
			t.obs[i][j] = t.vec.WithLabelValues(p, r)
		}
	}
	return t
}

// decided records one decision at point (pointOffload…), begun at start:
// allowed, or denied, or failed with err (which denies).
func (e *Engine) decided(point int, start time.Time, allow bool, err error) {
	result := 1 // deny
	switch {
	case err != nil:
		result = 2
	case allow:
		result = 0
	}
	e.decisionSeconds.obs[point][result].Observe(time.Since(start).Seconds())
}

// statusDescs describe the series read from Status at each collection.
var statusDescs = struct {
	reloads, refusals, evalErrs, cancelled, timeouts, refused, dropped, writeErrs *prometheus.Desc
}{
	reloads:   prometheus.NewDesc("spillway_policy_reloads_total", "Policies swapped in by a reload.", nil, nil),
	refusals:  prometheus.NewDesc("spillway_policy_reload_refusals_total", "Policies refused on reload (compile error or failing tests).", nil, nil),
	evalErrs:  prometheus.NewDesc("spillway_policy_eval_errors_total", "Decisions that failed to evaluate (and denied).", nil, nil),
	cancelled: prometheus.NewDesc("spillway_policy_eval_cancelled_total", "Decisions cancelled by their caller, e.g. a client that disconnected (and denied).", nil, nil),
	timeouts:  prometheus.NewDesc("spillway_policy_eval_timeouts_total", "Decisions that passed their deadline (and denied).", nil, nil),
	refused:   prometheus.NewDesc("spillway_policy_last_reload_refused", "1 when the newest policy on disk was refused.", nil, nil),
	dropped:   prometheus.NewDesc("spillway_policy_decision_log_dropped_total", "Decision log lines dropped because the queue was full.", nil, nil),
	writeErrs: prometheus.NewDesc("spillway_policy_decision_log_write_errors_total", "Decision log lines the writer failed to write.", nil, nil),
}

// Describe implements prometheus.Collector: the engine's series are its
// Status counters and spillway_policy_decision_duration_seconds.
func (e *Engine) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{statusDescs.reloads, statusDescs.refusals, statusDescs.evalErrs,
		statusDescs.cancelled, statusDescs.timeouts, statusDescs.refused, statusDescs.dropped, statusDescs.writeErrs} {
		ch <- d
	}
	e.decisionSeconds.vec.Describe(ch)
}

// Collect implements prometheus.Collector, reading Status once.
func (e *Engine) Collect(ch chan<- prometheus.Metric) {
	s := e.Status()
	refused := 0.0
	if s.LastError != "" {
		refused = 1
	}
	for _, m := range []struct {
		d *prometheus.Desc
		t prometheus.ValueType
		v float64
	}{
		{statusDescs.reloads, prometheus.CounterValue, float64(s.Reloads)},
		{statusDescs.refusals, prometheus.CounterValue, float64(s.Refusals)},
		{statusDescs.evalErrs, prometheus.CounterValue, float64(s.EvalErrors)},
		{statusDescs.cancelled, prometheus.CounterValue, float64(s.EvalCancelled)},
		{statusDescs.timeouts, prometheus.CounterValue, float64(s.EvalTimeouts)},
		{statusDescs.refused, prometheus.GaugeValue, refused},
		{statusDescs.dropped, prometheus.CounterValue, float64(s.DecisionLogDropped)},
		{statusDescs.writeErrs, prometheus.CounterValue, float64(s.DecisionLogWriteErrors)},
	} {
		ch <- prometheus.MustNewConstMetric(m.d, m.t, m.v)
	}
	e.decisionSeconds.vec.Collect(ch)
}

// WriteMetrics writes the engine's series alone in the Prometheus text
// format (tests and tools; /metrics gathers the engine, a
// prometheus.Collector, from a registry).
func (e *Engine) WriteMetrics(w io.Writer) {
	_ = promtext.Write(w, e)
}
