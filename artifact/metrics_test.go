package artifact

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// A nil *Metrics measures nothing and writes nothing; its methods never
// panic.
func TestNilMetrics(t *testing.T) {
	var m *Metrics
	m.fetched(200, 10, time.Millisecond)
	m.put(10, nil)
	m.storeOp("put", time.Now(), errors.New("boom"))
	m.revocationsHeld(1)
	m.revocationRead(time.Millisecond, nil)
	m.revocationRefused()
	var b bytes.Buffer
	m.WritePrometheus(&b)
	if b.Len() != 0 {
		t.Errorf("a nil Metrics wrote %q", b.String())
	}
}

// The zero Metrics is ready: every status class and store operation is
// exported at zero before anything happens, the exposition parses, and
// store errors count only what says something about the store.
func TestZeroMetricsStoreOps(t *testing.T) {
	var m Metrics
	mfs := parseMetrics(t, &m)
	for _, name := range []string{"spillway_fetch_requests_total", "spillway_fetch_duration_seconds"} {
		if n := len(mfs[name].GetMetric()); n != len(statusClasses) {
			t.Errorf("%s: %d series before any fetch, want %d", name, n, len(statusClasses))
		}
	}
	for _, name := range []string{"spillway_store_operation_duration_seconds", "spillway_store_operation_errors_total"} {
		if n := len(mfs[name].GetMetric()); n != len(storeOps) {
			t.Errorf("%s: %d series, want %d", name, n, len(storeOps))
		}
	}

	start := time.Now().Add(-5 * time.Millisecond)
	m.storeOp("stat", start, fmt.Errorf("stat x: %w", ErrNotFound))          // a missing artifact
	m.storeOp("put", start, fmt.Errorf("put x: %w", ErrIntegrity))           // what was sent
	m.storeOp("open", start, fmt.Errorf("open: %w", context.Canceled))       // a caller that left
	m.storeOp("open", start, fmt.Errorf("open: %w", ErrUnavailable))         // the store
	m.storeOp("put", start, fmt.Errorf("put: %w", context.DeadlineExceeded)) // the store, too slow
	m.storeOp("delete", start, nil)
	m.fetched(206, 100, 3*time.Millisecond)
	m.fetched(999, 0, time.Millisecond)

	mfs = parseMetrics(t, &m)
	for _, tt := range []struct {
		family, label, value string
		want                 float64
	}{
		{"spillway_store_operation_errors_total", "op", "stat", 0},
		{"spillway_store_operation_errors_total", "op", "open", 1},
		{"spillway_store_operation_errors_total", "op", "put", 1},
		{"spillway_store_operation_errors_total", "op", "delete", 0},
		{"spillway_store_operation_duration_seconds", "op", "open", 2},
		{"spillway_store_operation_duration_seconds", "op", "delete", 1},
		{"spillway_fetch_duration_seconds", "code", "2xx", 1},
		{"spillway_fetch_duration_seconds", "code", "other", 1},
		{"spillway_fetch_requests_total", "code", "2xx", 1},
	} {
		if got := seriesValue(mfs[tt.family], tt.label, tt.value); got != tt.want {
			t.Errorf("%s{%s=%q} = %v, want %v", tt.family, tt.label, tt.value, got, tt.want)
		}
	}
	for _, m := range mfs["spillway_store_operation_duration_seconds"].GetMetric() {
		if h := m.GetHistogram(); h.GetSampleCount() > 0 && h.GetSampleSum() < .005 {
			t.Errorf("a store operation of 5 ms or more summed to %v s", h.GetSampleSum())
		}
	}
}

func parseMetrics(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	var b bytes.Buffer
	m.WritePrometheus(&b)
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(&b)
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return mfs
}

// seriesValue is the value of mf's series whose label is value: a
// counter's value, or a histogram's count.
func seriesValue(mf *dto.MetricFamily, label, value string) float64 {
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				if h := m.GetHistogram(); h != nil {
					return float64(h.GetSampleCount())
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	return -1
}
