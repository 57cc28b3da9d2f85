package ownmethods

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/arttools"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/offload"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
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

// OwnsTool reports whether a tools/call of name from rq's caller is the
// proxy's to answer (one of the artifact tools, not shadowed by the
// upstream's as listed to that tenant): such a call never reaches the
// upstream. Safe for concurrent use.
func (o *Methods) OwnsTool(rq Request, name string) bool {
	return o.toolsOn() && arttools.Is(name) && !o.schemas.Listed(rq.schemaKey(), name)
}

// toolItems are the tools/list entries of the tools the upstream does
// not shadow for rq's caller.
func (o *Methods) toolItems(rq Request) [][]byte {
	return arttools.List(func(name string) bool { return !o.schemas.Listed(rq.schemaKey(), name) })
}

// EnsureTool makes sure the proxy knows tool as the upstream lists it to
// rq's caller (its outputSchema, and through Options.LearnTools its
// x-mcp-header bindings), listing the upstream's tools with list when it
// does not; see offload.Learned.Ensure. One listing feeds both.
func (o *Methods) EnsureTool(ctx context.Context, rq Request, tool string, list offload.ListFunc) {
	o.schemas.Ensure(ctx, rq.schemaKey(), tool, func(ctx context.Context, cursor string) ([]byte, error) {
		r, err := list(ctx, cursor)
		r, _ = expand(r) // read whole, as a client's listing is (After)
		return r, err
	}, o.o.LearnTools)
}

// callTool answers a tools/call of one of the artifact tools. Every
// failure is a tool error (isError) with a text the agent can act on; a
// large answer is offloaded like an upstream result.
func (o *Methods) callTool(ctx context.Context, rq Request, m *jsonrpc.Message) *jsonrpc.Message {
	name := jsonrpc.StringMember(m.Params, "name")
	text, long, err := o.runTool(ctx, rq, name, jsonrpc.RawMember(m.Params, "arguments"))
	fields := map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
	if long != nil {
		defer long.Close()
		var item []byte
		if item, err = o.spillAnswer(rq, long); err == nil {
			fields["content"] = []any{map[string]any{"type": "text", "text": long.Head}, json.RawMessage(item)}
		}
	}
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
//
// An answer bound for the store (an offloader and a spooler are set) is
// not cut: a long jq answer comes back whole, as a Long.
func (o *Methods) runTool(ctx context.Context, rq Request, name string, args []byte) (string, *arttools.Long, error) {
	c, err := arttools.Parse(name, args)
	if err != nil {
		return "", nil, err
	}
	a, _, ra, err := o.authorizeRead(ctx, rq, c.ID, artifact.ViaRead)
	if err != nil {
		_, msg := o.accessMessage(c.ID, err)
		return "", nil, errors.New(msg)
	}
	src := arttools.Source{URI: artifact.URI(a.ID), Tenant: a.Tenant, Size: a.Size,
		Open: func(ctx context.Context, off, n int64) (io.ReadCloser, error) {
			return o.o.Artifacts.Store.Open(ctx, a.ID, off, n)
		}}
	var text string
	var long *arttools.Long
	if o.o.Offloader != nil && o.o.Spool != nil {
		text, long, err = o.tools.RunLong(ctx, c, src)
	} else {
		text, err = o.tools.Run(ctx, c, src)
	}
	ra.done(answered(text, long), "", toolError(err))
	switch {
	case err == nil:
		return text, long, nil
	case errors.Is(err, arttools.ErrInvalid):
		return "", nil, err
	case ctx.Err() != nil:
		return "", nil, errors.New("the call was cancelled")
	}
	_, msg := o.accessMessage(c.ID, err)
	return "", nil, errors.New(msg)
}

// spillAnswer is a long answer's outputs as a text content item whose
// text the spooler holds on disk, as it holds an upstream's large text:
// the offloader then stores it whole (the marker in the item resolves
// to the file's bytes), previewed as it is read.
func (o *Methods) spillAnswer(rq Request, l *arttools.Long) ([]byte, error) {
	item := io.MultiReader(strings.NewReader(`{"type":"text","text":"`), &spelt{src: l.Body()}, strings.NewReader(`"}`))
	b, err := o.o.Spool.For(rq.Tenant).Read(item, 64<<10)
	switch {
	case errors.Is(err, spill.ErrFull):
		return nil, fmt.Errorf("the answer (%d bytes) finds no room in the proxy's spill space now: try again later, or narrow the program", l.Size())
	case err != nil:
		o.log.Error("spilling a jq answer failed", "err", err)
		return nil, errors.New("the answer could not be kept for storing: try again, or narrow the program")
	}
	return b, nil
}

// spelt reads src's bytes (UTF-8) spelt as the inside of a JSON string.
type spelt struct {
	src io.Reader
	buf []byte
	out []byte
}

func (s *spelt) Read(p []byte) (int, error) {
	if s.buf == nil {
		s.buf = make([]byte, 32<<10)
	}
	for len(s.out) == 0 {
		n, err := s.src.Read(s.buf)
		s.out = spill.Spell(s.out[:0], s.buf[:n], spill.Text)
		if len(s.out) == 0 && err != nil {
			return 0, err
		}
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// Envelope is the stateless-era envelope of a request of the caller's:
// its _meta (nil: none), copied, for ListRequest.
func Envelope(m *jsonrpc.Message) []byte {
	return bytes.Clone(jsonrpc.RawMember(m.Params, "_meta"))
}

// ListRequest is page cursor ("" for the first) of the proxy's own
// tools/list for a caller whose request had _meta meta (see Envelope):
// it carries the stateless-era envelope in it (the members in the
// io.modelcontextprotocol/ namespace: revision, capabilities, client),
// and none of the rest (a progress token is that request's own).
func ListRequest(meta []byte, cursor string) *jsonrpc.Message {
	params := map[string]any{}
	if meta != nil {
		var env map[string]json.RawMessage
		if json.Unmarshal(meta, &env) == nil {
			for k := range env {
				if !strings.HasPrefix(k, "io.modelcontextprotocol/") {
					delete(env, k)
				}
			}
			if len(env) > 0 {
				params["_meta"] = env
			}
		}
	}
	if cursor != "" {
		params["cursor"] = cursor
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": "spillway-tools", "method": "tools/list", "params": params})
	m, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		panic("ownmethods: the proxy's own tools/list did not decode: " + err.Error())
	}
	return m
}

// ListTools returns how to list the upstream's tools for the caller of m
// (a tools/call whose result needs the tool's outputSchema, or its
// bindings checked): each page is a tools/list of the proxy's own, sent
// with send and carrying m's stateless-era envelope when envelope is set
// (ListRequest). An error response is an error.
func ListTools(m *jsonrpc.Message, envelope bool, send func(context.Context, *jsonrpc.Message) (*jsonrpc.Message, error)) offload.ListFunc {
	var meta []byte
	if envelope {
		meta = Envelope(m)
	}
	return func(ctx context.Context, cursor string) ([]byte, error) {
		resp, err := send(ctx, ListRequest(meta, cursor))
		if err != nil {
			return nil, err
		}
		if resp.Error != nil {
			return nil, fmt.Errorf("tools/list: the upstream answered error %d", resp.ErrorCode())
		}
		return resp.Result, nil
	}
}

// toolError is err as an audit line tells it: a program or arguments the
// tool refused is the caller's invalid request (400), not the store's.
func toolError(err error) error {
	if errors.Is(err, arttools.ErrInvalid) {
		return fmt.Errorf("%w: %w", artifact.ErrInvalid, err)
	}
	return err
}

// answered is the size of a tool's answer: what left of the artifact.
func answered(text string, long *arttools.Long) int64 {
	if long != nil {
		return long.Size()
	}
	return int64(len(text))
}
