package mcpproxy

import (
	"context"
	"net/http"

	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/binary"
	"github.com/spillway-dev/spillway/mcpproxy/internal/faces/stdio"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
)

// The opt-in extensions (resumable streams, binary transfer) sit in front
// of the face the upstream's kind chose: each wraps what a client's HTTP
// requests reach and what a stdio client reads and is written, so that
// they work alike for every upstream, a gateway's included. Each declares
// its capability to the clients that declared theirs, and to no other:
// those see the face alone, byte for byte.

// frontHandler serves one authenticated /mcp request: a face, or an
// extension in front of one.
type frontHandler interface {
	ServeHTTP(w http.ResponseWriter, r *http.Request, rq ownmethods.Request)
}

// declare returns what the extensions add to the capabilities of an
// initialize or server/discover result for a client that declared client
// (ownmethods.Options.Declare).
func (p *Proxy) declare(client []byte) map[string][]byte {
	var add map[string][]byte
	for _, d := range []func([]byte) (string, []byte){p.streams.Declare, p.binary.Declare} {
		if name, value := d(client); value != nil {
			if add == nil {
				add = map[string][]byte{}
			}
			add[name] = value
		}
	}
	return add
}

// front is the chain a request takes to the face: the extensions, the
// last declared outermost: binary transfer, then resumable streams, then
// the face, measured (metrics.go). (A binary client's stream events are read back by the binary
// extension and written as parts, their event ids kept.)
func (p *Proxy) front(face frontHandler) frontHandler {
	h := p.observe(face)
	h = p.streams.HTTP(h)
	h = p.binary.Wrap(h)
	return h
}

// stdioClient is a stdio client as the face sees it, through the
// extensions, until ctx ends. Binary transfer is innermost there: its
// frames must follow their line on the client's connection itself.
func (p *Proxy) stdioClient(ctx context.Context, c stdio.Client) stdio.Client {
	c = p.binary.Client(ctx, c)
	c = p.streams.Stdio(ctx, c)
	return c
}

// newBinary is the binary transfer extension (package binary): binary
// items as multipart/mixed parts on HTTP and frames on stdio, for the
// clients that declared binaryTransfer.
func (p *Proxy) newBinary() *binary.Extension {
	o := p.o
	return binary.New(binary.Options{Methods: p.methods, Spool: p.spool, MaxBody: o.MaxBody, MaxMessage: o.MaxMessage,
		WriteStall: o.WriteStallTimeout, Logger: o.Logger})
}
