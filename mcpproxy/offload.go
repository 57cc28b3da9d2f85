package mcpproxy

import (
	"io"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/offload"
	"github.com/spillway-dev/spillway/mcpproxy/internal/spill"
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
		o.Spills = spills{}
	}
	return offload.New(svc, dec, o)
}

// spills is the process's spill registry as the offloader asks it.
type spills struct{}

func (spills) Lookup(lit []byte) (offload.Spilled, bool) {
	if s, ok := spill.Lookup(lit); ok {
		return s, true
	}
	return nil, false
}

func (spills) Release(lit []byte) {
	if s, ok := spill.Lookup(lit); ok {
		s.Release()
	}
}
func (spills) ExpandedLen(raw []byte) int64         { return spill.ExpandedLen(raw) }
func (spills) Expand(w io.Writer, raw []byte) error { return spill.Expand(w, raw) }
