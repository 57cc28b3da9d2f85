package policy

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/spillway-dev/spillway/artifact/tracing"
)

// traced records a decision at point (pointOffload…), begun at start, as
// a span "spillway.policy {point}" under ctx's span (none without one):
// its result is allow, deny or error (which denies; for offload, allow
// means offloaded). An evaluation failure fails the span with its error,
// which names the point and the cause, never the input.
func traced(ctx context.Context, point int, start time.Time, allow bool, err error) {
	if !tracing.On() {
		return
	}
	result := 1 // deny, as decided counts it
	switch {
	case err != nil:
		result = 2
	case allow:
		result = 0
	}
	tracing.Record(ctx, "spillway.policy "+decisionPoints[point], start, err,
		attribute.String(tracing.PolicyPoint, decisionPoints[point]),
		attribute.String(tracing.PolicyResult, decisionResults[result]))
}
