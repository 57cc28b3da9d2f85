package ownmethods

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"unicode/utf8"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/offload"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/policy"
)

// CodeResourceNotFound is MCP's "resource not found".
const CodeResourceNotFound = -32002

// Bounds of the remembered artifacts.
const (
	recentPerTenant = 100    // the most recent artifacts listed per tenant
	recentTenants   = 10_000 // tenants remembered at once
)

// recent remembers, per tenant, the artifacts offloaded lately, for
// resources/list. Memory is bounded: recentPerTenant artifacts for each
// of at most recentTenants tenants (past it, an arbitrary other tenant's
// list is forgotten; its artifacts stay readable, only unlisted).
type recent struct {
	mu sync.Mutex
	by map[string][]artifact.Artifact
}

func newRecent() recent { return recent{by: map[string][]artifact.Artifact{}} }

// Remember records an artifact offloaded for tenant so resources/list can
// show it. Safe for concurrent use.
func (o *Methods) Remember(tenant string, a artifact.Artifact) {
	r := &o.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	l, known := r.by[tenant]
	if !known && len(r.by) >= recentTenants {
		for t := range r.by {
			delete(r.by, t)
			break
		}
	}
	l = append(l, a)
	if len(l) > recentPerTenant {
		l = append([]artifact.Artifact(nil), l[len(l)-recentPerTenant:]...)
	}
	r.by[tenant] = l
}

// listArtifacts returns the resources/list items of the caller's
// remembered artifacts that the access rule lets it read now (deleted,
// expired and denied ones are left out).
func (o *Methods) listArtifacts(ctx context.Context, rq Request) [][]byte {
	o.recent.mu.Lock()
	l := append([]artifact.Artifact(nil), o.recent.by[rq.Tenant]...)
	o.recent.mu.Unlock()
	var items [][]byte
	for _, r := range l {
		a, _, err := o.authorize(ctx, rq, r.ID, artifact.ViaRead)
		if err != nil {
			continue
		}
		name := a.Name
		if name == "" {
			name = a.ID // the schema requires a name
		}
		b, _ := json.Marshal(map[string]any{
			"uri": artifact.URI(a.ID), "name": name, "mimeType": a.MimeType, "size": a.Size, "streamable": true,
		})
		items = append(items, b)
	}
	return items
}

// readArtifact answers resources/read for one of the proxy's artifacts.
func (o *Methods) readArtifact(ctx context.Context, rq Request, reqID []byte, id string) *jsonrpc.Message {
	a, _, ra, err := o.authorizeRead(ctx, rq, id, artifact.ViaRead)
	if err != nil {
		return o.accessError(reqID, id, err)
	}
	if a.Size > o.o.MaxInlineRead { // nothing leaves: no audit line
		return jsonrpc.ErrorResponse(reqID, jsonrpc.CodeInvalidParams, fmt.Sprintf(
			"artifact is %d bytes, more than resources/read returns inline; use resources/stream or its httpUrl", a.Size))
	}
	rc, err := o.o.Artifacts.Store.Open(ctx, id, 0, -1)
	if err != nil {
		ra.done(0, "", err)
		return o.accessError(reqID, id, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, o.o.MaxInlineRead+1))
	ra.done(int64(len(data)), "", err)
	if err != nil {
		return o.accessError(reqID, id, err)
	}
	item := map[string]any{"uri": artifact.URI(id), "mimeType": a.MimeType}
	if offload.IsText(a.MimeType) && utf8.Valid(data) {
		item["text"] = string(data)
	} else {
		item["blob"] = base64.StdEncoding.EncodeToString(data)
	}
	return jsonrpc.Response(reqID, result(rq, true, map[string]any{"contents": []any{item}}))
}

// accessError is the one mapping of artifact access errors to JSON-RPC.
// What the caller may not see does not exist (-32002); a policy denial
// says so with the policy's reason; the cause of anything else goes to
// the log only.
func (o *Methods) accessError(reqID []byte, id string, err error) *jsonrpc.Message {
	code, msg := o.accessMessage(id, err)
	return jsonrpc.ErrorResponse(reqID, code, msg)
}

// accessMessage is accessError's JSON-RPC code and message, for answers
// that carry the message another way (the artifact tools' tool errors).
func (o *Methods) accessMessage(id string, err error) (code int, msg string) {
	var denied *artifact.DeniedError
	switch {
	case errors.Is(err, artifact.ErrNotFound), errors.Is(err, artifact.ErrExpired):
		return CodeResourceNotFound, "resource not found: " + artifact.URI(id)
	case errors.As(err, &denied):
		msg := "denied by policy"
		switch {
		case denied.Err != nil:
			o.log.Warn("no fetch decision; denying", "artifact", id, "err", err)
			msg = "denied: the policy could not be evaluated"
		case denied.Reason != "":
			msg += ": " + denied.Reason
		}
		return jsonrpc.CodeInvalidRequest, msg
	case errors.Is(err, artifact.ErrUnavailable):
		o.log.Warn("artifact store unavailable", "artifact", id, "err", err)
		return jsonrpc.CodeInternalError, "artifact store unavailable; retry later"
	}
	o.log.Error("reading an artifact failed", "artifact", id, "err", err)
	return jsonrpc.CodeInternalError, "reading the artifact failed"
}

// authorize is the one access rule for the proxy's methods: the /a/
// endpoint's (artifact.Service.Authorize), with the way the bytes leave
// (artifact.ViaRead for resources/read and what resources/list shows,
// ViaStream, ViaRedirect for a presigned storage URL).
func (o *Methods) authorize(ctx context.Context, rq Request, id, via string) (artifact.Artifact, policy.FetchDecision, error) {
	in := artifact.Access{ID: id, Tenant: rq.Tenant, Via: via, Method: http.MethodGet, Source: rq.Source, Header: rq.Header}
	if !rq.Stdio {
		in.Path = "/mcp"
	}
	return o.o.Artifacts.Authorize(ctx, in)
}
