package offload

import "github.com/spillway-dev/spillway/artifact"

// Metrics counts what the Rewriter stores; the proxy's metrics.Set is
// one. It must be safe for concurrent use.
type Metrics interface {
	// Offloaded is called once for each item stored: its kind (text,
	// image, audio, resource, structured), the bytes written to the
	// store, and the bytes kept out of the agent's context.
	Offloaded(kind string, stored, saved int64)
}

// counted counts the unit u stored as p, when the Rewriter has Metrics.
func (f *Rewriter) counted(u unit, p *published) {
	if f.o.Metrics != nil {
		f.o.Metrics.Offloaded(u.kind, p.a.Size, p.a.Size-p.inlineLen())
	}
}

// inlineLen is about what p leaves in the result in place of its bytes:
// the preview's text and sentence, the link's URL and URI (in the
// resource_link), and the thumbnail (base64). The bytes kept out of the
// context are counted on the item's decoded size, so an item the
// upstream sent in base64 saved a third more than is counted.
func (p *published) inlineLen() int64 {
	n := int64(len(p.text) + len(p.l.URL) + len(artifact.URI(p.a.ID)))
	if p.thumb != nil {
		n += int64(len(p.thumb.Data)+2) / 3 * 4
	}
	return n
}
