package owned

import (
	"context"
	"errors"
	"io"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/arttools"
	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
)

// The artifact tools (package arttools) let an agent without a sandbox
// read, search and query an artifact. They are listed after the
// upstream's tools on the first page of tools/list and answered here,
// never sent upstream. An upstream tool of the same name wins: once the
// upstream's tools/list shows it, ours is neither listed nor answered.

// maxToolAnswer caps a tool's answer when nothing offloads it.
const maxToolAnswer = 64 << 10

// toolsOn reports whether the artifact tools are served.
func (o *Methods) toolsOn() bool { return o.o.Artifacts != nil && !o.o.NoArtifactTools }

// OwnsTool reports whether a tools/call of name is the proxy's to answer
// (one of the artifact tools, not shadowed by the upstream's): such a
// call never reaches the upstream. Safe for concurrent use.
func (o *Methods) OwnsTool(name string) bool {
	return o.toolsOn() && arttools.Is(name) && !o.schemas.Listed(name)
}

// toolItems are the tools/list entries of the tools the upstream does
// not shadow.
func (o *Methods) toolItems() [][]byte {
	return arttools.List(func(name string) bool { return !o.schemas.Listed(name) })
}

// callTool answers a tools/call of one of the artifact tools. Every
// failure is a tool error (isError) with a text the agent can act on; a
// large answer is offloaded like an upstream result.
func (o *Methods) callTool(ctx context.Context, rq Request, m *jsonrpc.Message) *jsonrpc.Message {
	name := jsonrpc.StringMember(m.Params, "name")
	text, err := o.runTool(ctx, rq, name, jsonrpc.RawMember(m.Params, "arguments"))
	fields := map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
	if err != nil {
		fields["content"] = []any{map[string]any{"type": "text", "text": err.Error()}}
		fields["isError"] = true
	}
	resp := jsonrpc.Response(m.ID, result(rq, false, fields))
	if err != nil {
		return resp
	}
	return o.offload(ctx, &Call{Method: "tools/call", Tool: name, Request: rq}, resp)
}

// runTool runs a tool for the caller, through the access rule every read
// of an artifact takes: another tenant's artifact, or one the policy
// denies, is answered as resources/read answers it.
func (o *Methods) runTool(ctx context.Context, rq Request, name string, args []byte) (string, error) {
	c, err := arttools.Parse(name, args)
	if err != nil {
		return "", err
	}
	a, _, err := o.authorize(ctx, rq, c.ID, artifact.ViaRead)
	if err != nil {
		_, msg := o.accessMessage(c.ID, err)
		return "", errors.New(msg)
	}
	src := arttools.Source{URI: artifact.URI(a.ID), Tenant: a.Tenant, Size: a.Size,
		Open: func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
			return o.o.Artifacts.Store.Open(ctx, a.ID, off, n)
		}}
	text, err := o.tools.Run(ctx, c, src)
	switch {
	case err == nil:
		return text, nil
	case errors.Is(err, arttools.ErrInvalid):
		return "", err
	case ctx.Err() != nil:
		return "", errors.New("the call was cancelled")
	}
	_, msg := o.accessMessage(c.ID, err)
	return "", errors.New(msg)
}
