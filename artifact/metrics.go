package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// Metrics counts what the artifact service does. The zero value is ready;
// a nil *Metrics counts nothing. Safe for concurrent use.
type Metrics struct {
	fetches     [6]atomic.Int64 // by status class: 1xx..5xx, other
	fetchBytes  atomic.Int64
	puts        atomic.Int64
	putBytes    atomic.Int64
	putFailures atomic.Int64

	revHeld         atomic.Int64 // revoked tokens held in memory, all artifacts
	revReads        atomic.Int64
	revReadFailures atomic.Int64
	revReadNanos    atomic.Int64
	revRefused      atomic.Int64 // Revoke calls past a bound
}

func (m *Metrics) revocationsHeld(delta int) {
	if m != nil {
		m.revHeld.Add(int64(delta))
	}
}

func (m *Metrics) revocationRead(d time.Duration, err error) {
	if m == nil {
		return
	}
	m.revReads.Add(1)
	m.revReadNanos.Add(int64(d))
	if err != nil {
		m.revReadFailures.Add(1)
	}
}

func (m *Metrics) revocationRefused() {
	if m != nil {
		m.revRefused.Add(1)
	}
}

func (m *Metrics) fetched(status int, n int64) {
	if m == nil {
		return
	}
	c := status/100 - 1
	if c < 0 || c > 4 {
		c = 5
	}
	m.fetches[c].Add(1)
	m.fetchBytes.Add(n)
}

func (m *Metrics) put(size int64, err error) {
	if m == nil {
		return
	}
	if err != nil {
		if !senderFault(err) {
			m.putFailures.Add(1)
		}
		return
	}
	m.puts.Add(1)
	m.putBytes.Add(size)
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

// WritePrometheus writes the counters in the Prometheus text format.
func (m *Metrics) WritePrometheus(w io.Writer) {
	header(w, "spillway_fetch_requests_total", "counter", "Fetches of artifact links, by status class.")
	for i, class := range []string{"1xx", "2xx", "3xx", "4xx", "5xx", "other"} {
		fmt.Fprintf(w, "spillway_fetch_requests_total{code=%q} %d\n", class, m.fetches[i].Load())
	}
	for _, c := range []struct {
		name, typ, help string
		v               *atomic.Int64
	}{
		{"spillway_fetch_bytes_total", "counter", "Artifact bytes served.", &m.fetchBytes},
		{"spillway_artifacts_stored_total", "counter", "Artifacts stored.", &m.puts},
		{"spillway_artifact_bytes_stored_total", "counter", "Artifact bytes stored.", &m.putBytes},
		{"spillway_artifact_store_failures_total", "counter", "Puts that failed in the store, not for what was sent.", &m.putFailures},
		{"spillway_revocation_entries", "gauge", "Revoked link tokens this replica holds, over the artifacts whose revocations it has read.", &m.revHeld},
		{"spillway_revocation_read_failures_total", "counter", "Readings of an artifact's revocations that failed (its links answer 503 once its copy is 4 s old).", &m.revReadFailures},
		{"spillway_revocation_limit_total", "counter", "Revokes refused because the artifact or its tenant had as many revoked links as allowed.", &m.revRefused},
	} {
		header(w, c.name, c.typ, c.help)
		fmt.Fprintf(w, "%s %d\n", c.name, c.v.Load())
	}
	header(w, "spillway_revocation_read_seconds", "summary", "Readings of one artifact's revocations from the store.")
	fmt.Fprintf(w, "spillway_revocation_read_seconds_sum %g\n", time.Duration(m.revReadNanos.Load()).Seconds())
	fmt.Fprintf(w, "spillway_revocation_read_seconds_count %d\n", m.revReads.Load())
}

func header(w io.Writer, name, typ, help string) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}
