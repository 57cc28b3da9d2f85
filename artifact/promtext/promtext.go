// Package promtext writes collectors in the Prometheus text format, for
// the packages that keep a WritePrometheus-style method beside their
// prometheus.Collector (tests and tools read one package's metrics alone;
// /metrics gathers every collector from one registry).
package promtext

import (
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// Write gathers cs through a registry of their own and writes them to w in
// the text exposition format (version 0.0.4). It returns the first error
// of registering, gathering or writing; what was gathered is written even
// when gathering failed for some metric.
func Write(w io.Writer, cs ...prometheus.Collector) error {
	reg := prometheus.NewRegistry()
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	mfs, gerr := reg.Gather()
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return gerr
}
