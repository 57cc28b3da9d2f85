package ownmethods

import (
	"context"
	"io"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// OpenArtifact opens the proxy's artifact at uri for rq's caller as
// resources/read reads it (the same access rule, artifact.ViaRead), for
// the binary transfer extension, which streams the bytes to its client
// instead of answering them base64: so no byte leaves that resources/read
// would not give, and no size cap applies (the bytes are never held).
// ours is false, nothing done, when uri is not one of the proxy's
// artifacts (or the proxy serves none). On failure fail is the JSON-RPC
// error that answers reqID (resource not found for what the caller may not
// see) and rc is nil; otherwise the caller closes rc.
func (o *Methods) OpenArtifact(ctx context.Context, rq Request, reqID []byte, uri string) (a artifact.Artifact, rc io.ReadCloser, fail *jsonrpc.Message, ours bool) {
	id, ours := o.ours(uri)
	if !ours {
		return a, nil, nil, false
	}
	a, _, err := o.authorize(ctx, rq, id, artifact.ViaRead)
	if err != nil {
		return a, nil, o.accessError(reqID, id, err), true
	}
	rc, err = o.o.Artifacts.Store.Open(ctx, id, 0, -1)
	if err != nil {
		return a, nil, o.accessError(reqID, id, err), true
	}
	return a, rc, nil, true
}

// ReadResult is a resources/read result the proxy answers itself, with
// contents items, in rq's revision (2026-07-28: resultType, and private,
// uncached).
func ReadResult(rq Request, contents []any) []byte {
	return result(rq, true, map[string]any{"contents": contents})
}
