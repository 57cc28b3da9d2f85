package artifact

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillway-dev/spillway/artifact/promtext"
)

// Metrics measures what the artifact service does: fetches, stores,
// revocations and every Store operation. It is a prometheus.Collector:
// register it on the registry that serves /metrics (artifact/README.md
// lists the series). The zero value is ready (its series are made on first
// use); a nil *Metrics measures nothing. Safe for concurrent use; must not
// be copied after first use.
type Metrics struct {
	once sync.Once
	s    *metricSet
}

// metricSet is the collectors of one Metrics.
type metricSet struct {
	fetches      *prometheus.CounterVec   // by status class
	fetchSeconds *prometheus.HistogramVec // by status class
	fetchBytes   prometheus.Counter
	puts         prometheus.Counter
	putBytes     prometheus.Counter
	putFailures  prometheus.Counter

	revHeld         prometheus.Gauge // revoked tokens held in memory, all artifacts
	revReadSeconds  prometheus.Histogram
	revReadFailures prometheus.Counter
	revRefused      prometheus.Counter // Revoke calls past a bound

	storeSeconds *prometheus.HistogramVec // by operation
	storeErrors  *prometheus.CounterVec   // by operation
}

// statusClasses are the values of the code label of the fetch series.
var statusClasses = []string{"1xx", "2xx", "3xx", "4xx", "5xx", "other"}

// storeOps are the values of the op label of the store series: one per
// Store method the service calls.
var storeOps = []string{"put", "stat", "open", "delete", "list_expired", "ping",
	"revoke", "revocations", "sweep_revocations", "delete_revocations"}

// latencyBuckets (seconds) serve fetches and store operations: from
// 100 µs (a cached metadata read and a small file sent from the page
// cache) to 30 s (a large artifact to a slow client, or an object store
// timing out), about two and a half per decade so that a p99 reads within
// a factor of 2.5.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func newMetricSet() *metricSet {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	s := &metricSet{
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spillway_fetch_requests_total", Help: "Fetches of artifact links, by status class.",
		}, []string{"code"}),
		fetchSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "spillway_fetch_duration_seconds", Help: "Time to answer a fetch of an artifact link, body included, by status class.",
			Buckets: latencyBuckets,
		}, []string{"code"}),
		fetchBytes:  counter("spillway_fetch_bytes_total", "Artifact bytes served."),
		puts:        counter("spillway_artifacts_stored_total", "Artifacts stored."),
		putBytes:    counter("spillway_artifact_bytes_stored_total", "Artifact bytes stored."),
		putFailures: counter("spillway_artifact_store_failures_total", "Puts that failed in the store, not for what was sent."),
		revHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "spillway_revocation_entries", Help: "Revoked link tokens this replica holds, over the artifacts whose revocations it has read.",
		}),
		revReadSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "spillway_revocation_read_seconds", Help: "Readings of one artifact's revocations from the store.",
			Buckets: latencyBuckets,
		}),
		revReadFailures: counter("spillway_revocation_read_failures_total", "Readings of an artifact's revocations that failed (its links answer 503 once its copy is 4 s old)."),
		revRefused:      counter("spillway_revocation_limit_total", "Revokes refused because the artifact or its tenant had as many revoked links as allowed."),
		storeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "spillway_store_operation_duration_seconds", Help: "Time the artifact store took for one operation, by operation (open: until the bytes can be read).",
			Buckets: latencyBuckets,
		}, []string{"op"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spillway_store_operation_errors_total", Help: "Store operations that failed in the store (not a missing artifact, a refused upload or a caller that left), by operation.",
		}, []string{"op"}),
	}
	// Every label value is exported from the start, at zero, so that a
	// rate over a series that has not moved yet is 0, not absent.
	for _, c := range statusClasses {
		s.fetches.WithLabelValues(c)
		s.fetchSeconds.WithLabelValues(c)
	}
	for _, op := range storeOps {
		s.storeSeconds.WithLabelValues(op)
		s.storeErrors.WithLabelValues(op)
	}
	return s
}

func (s *metricSet) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.fetches, s.fetchSeconds, s.fetchBytes, s.puts, s.putBytes, s.putFailures,
		s.revHeld, s.revReadSeconds, s.revReadFailures, s.revRefused, s.storeSeconds, s.storeErrors}
}

// set returns m's collectors, made on first use; nil for a nil m.
func (m *Metrics) set() *metricSet {
	if m == nil {
		return nil
	}
	m.once.Do(func() { m.s = newMetricSet() })
	return m.s
}

// Describe implements prometheus.Collector. A nil m describes nothing.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	if s := m.set(); s != nil {
		for _, c := range s.collectors() {
			c.Describe(ch)
		}
	}
}

// Collect implements prometheus.Collector. A nil m collects nothing.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	if s := m.set(); s != nil {
		for _, c := range s.collectors() {
			c.Collect(ch)
		}
	}
}

// WritePrometheus writes m's series alone in the Prometheus text format
// (tests and tools; /metrics gathers m from a registry). A nil m writes
// nothing.
func (m *Metrics) WritePrometheus(w io.Writer) {
	if m != nil {
		_ = promtext.Write(w, m)
	}
}

func (m *Metrics) revocationsHeld(delta int) {
	if s := m.set(); s != nil {
		s.revHeld.Add(float64(delta))
	}
}

func (m *Metrics) revocationRead(d time.Duration, err error) {
	if s := m.set(); s != nil {
		s.revReadSeconds.Observe(d.Seconds())
		if err != nil {
			s.revReadFailures.Inc()
		}
	}
}

func (m *Metrics) revocationRefused() {
	if s := m.set(); s != nil {
		s.revRefused.Inc()
	}
}

// fetched counts one fetch answered with status after d, n body bytes.
func (m *Metrics) fetched(status int, n int64, d time.Duration) {
	s := m.set()
	if s == nil {
		return
	}
	c := status/100 - 1
	if c < 0 || c > 4 {
		c = 5
	}
	s.fetches.WithLabelValues(statusClasses[c]).Inc()
	s.fetchSeconds.WithLabelValues(statusClasses[c]).Observe(d.Seconds())
	s.fetchBytes.Add(float64(n))
}

func (m *Metrics) put(size int64, err error) {
	s := m.set()
	if s == nil {
		return
	}
	if err != nil {
		if !senderFault(err) {
			s.putFailures.Inc()
		}
		return
	}
	s.puts.Inc()
	s.putBytes.Add(float64(size))
}

// storeOp records one Store operation, op (one of storeOps), begun at
// start and ended with err. Errors that say nothing about the store (a
// missing artifact, what was sent, a caller that left) are not counted
// as its errors; a deadline passed in the store is.
func (m *Metrics) storeOp(op string, start time.Time, err error) {
	s := m.set()
	if s == nil {
		return
	}
	s.storeSeconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil && !errors.Is(err, ErrNotFound) && !senderFault(err) {
		s.storeErrors.WithLabelValues(op).Inc()
	}
}

// senderFault reports whether a Put failed because of what was sent (or
// the sender leaving) rather than because of the store.
func senderFault(err error) bool {
	for _, e := range []error{ErrIncomplete, ErrTooLarge, ErrIntegrity, ErrInvalid, ErrExists, context.Canceled} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
