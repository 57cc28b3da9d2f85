package mcpproxy

import (
	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/offload"
)

// Offloader replaces large items of tools/call and resources/read results
// with a preview and a link (package offload). Safe for concurrent use.
type Offloader = offload.Rewriter

// OffloadOptions tune an Offloader. Zero values take the defaults.
type OffloadOptions = offload.Options

// NewOffloader returns an offloader storing into svc and asking dec
// (*policy.Engine is one) about every item over the thresholds. It stores
// the strings the transport spilled to disk from there (o.Spills nil: the
// process's spill registry).
func NewOffloader(svc *artifact.Service, dec offload.Decider, o OffloadOptions) *Offloader {
	if o.Spills == nil {
		o.Spills = offload.Registry{}
	}
	return offload.New(svc, dec, o)
}
