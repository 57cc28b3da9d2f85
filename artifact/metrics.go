package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// Metrics counts what the artifact service does. The zero value is ready;
// a nil *Metrics counts nothing. Safe for concurrent use.
type Metrics struct {
	fetches     [6]atomic.Int64 // by status class: 1xx..5xx, other
	fetchBytes  atomic.Int64
	puts        atomic.Int64
	putBytes    atomic.Int64
	putFailures atomic.Int64
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
	fmt.Fprintln(w, "# HELP spillway_fetch_requests_total Fetches of artifact links, by status class.")
	fmt.Fprintln(w, "# TYPE spillway_fetch_requests_total counter")
	for i, class := range []string{"1xx", "2xx", "3xx", "4xx", "5xx", "other"} {
		fmt.Fprintf(w, "spillway_fetch_requests_total{code=%q} %d\n", class, m.fetches[i].Load())
	}
	fmt.Fprintln(w, "# HELP spillway_fetch_bytes_total Artifact bytes served.")
	fmt.Fprintln(w, "# TYPE spillway_fetch_bytes_total counter")
	fmt.Fprintf(w, "spillway_fetch_bytes_total %d\n", m.fetchBytes.Load())
	fmt.Fprintln(w, "# HELP spillway_artifacts_stored_total Artifacts stored.")
	fmt.Fprintln(w, "# TYPE spillway_artifacts_stored_total counter")
	fmt.Fprintf(w, "spillway_artifacts_stored_total %d\n", m.puts.Load())
	fmt.Fprintln(w, "# HELP spillway_artifact_bytes_stored_total Artifact bytes stored.")
	fmt.Fprintln(w, "# TYPE spillway_artifact_bytes_stored_total counter")
	fmt.Fprintf(w, "spillway_artifact_bytes_stored_total %d\n", m.putBytes.Load())
	fmt.Fprintln(w, "# HELP spillway_artifact_store_failures_total Puts that failed in the store, not for what was sent.")
	fmt.Fprintln(w, "# TYPE spillway_artifact_store_failures_total counter")
	fmt.Fprintf(w, "spillway_artifact_store_failures_total %d\n", m.putFailures.Load())
}
