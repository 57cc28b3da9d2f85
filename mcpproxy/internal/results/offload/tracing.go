package offload

import (
	"context"

	"go.opentelemetry.io/otel/attribute"

	"github.com/spillway-dev/spillway/artifact/tracing"
)

// startOffload starts the span of offloading u (its decision, the store
// put, the link): a child of the call's span, none without one.
func startOffload(ctx context.Context, u unit) (context.Context, *tracing.Span) {
	return tracing.StartChild(ctx, "spillway.offload "+u.kind,
		attribute.String(tracing.ArtifactKind, u.kind), attribute.Int64(tracing.ArtifactSize, u.size))
}

// endOffload ends sp with what publish made of its unit: p stored (its
// id and size), nothing (kept inline), or err (the store failed).
func endOffload(sp *tracing.Span, p *published, err error) {
	if sp == nil {
		return
	}
	sp.Set(attribute.Bool(tracing.Offloaded, p != nil))
	if p != nil {
		sp.Set(attribute.String(tracing.ArtifactID, p.a.ID), attribute.Int64(tracing.ArtifactSize, p.a.Size))
	}
	sp.End(err)
}
