package offload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// ErrWithheld is returned by Rewrite for a resources/read result that
// FailClosed withholds: an item was too large to return inline and could
// not be stored. (A tools/call result is withheld as a tool error.)
var ErrWithheld = errors.New("offload: the result was too large to return inline and could not be stored")

// Rewrite returns result with every large item offloaded, and the
// artifacts it stored. When nothing is offloaded it returns result itself.
// Bytes outside the replaced items are copied unchanged, and the result
// keeps its method's shape: tools/call items become a text preview and a
// resource_link; a resources/read item stays a resource-contents item
// (see resourceItem). An error means result is not valid JSON, or
// ErrWithheld; the artifacts stored before it are returned all the same.
//
// ctx's values pass to the policy and the store, its cancellation does
// not: a client that leaves while its result is stored would otherwise
// get the result inline on its next delivery (another stream of its
// session, a replay after Last-Event-ID) and leave a store cut half way.
// Options.StoreStall bounds the work instead, by its progress: a large
// result on a slow store is stored however long it takes while it moves.
// A thumbnail, which only the client waits for, is drawn only while ctx
// lasts.
func (f *Rewriter) Rewrite(ctx context.Context, c Call, result []byte) ([]byte, []artifact.Artifact, error) {
	if c.Method == "tools/call" && f.o.Tools != nil {
		if on, ok := f.o.Tools[c.Tool]; ok && !on {
			return result, nil, nil
		}
	}
	if !jsonrpc.Valid(result) { // encoding/json's answer, at a third of its cost
		return nil, nil, fmt.Errorf("offload: result is not valid JSON")
	}
	if n := f.lit.rawLen(result); !f.budget.over(n) && n <= min(f.o.TextThreshold, f.o.BinaryThreshold) {
		return result, nil, nil // nothing in it can be over a threshold or the budget
	}
	// Only a result that may be stored gets the store's watch. The
	// call's own cancellation goes on as a value, for what only its
	// client waits for (previewWhileCalled).
	ctx, stop := watchStall(withCall(ctx), f.o.StoreStall)
	defer stop()
	if c.Method != "resources/read" {
		return f.rewriteResult(ctx, c, result)
	}
	return f.rewriteContents(ctx, c, result)
}

// rewriteResult is Rewrite for a tools/call result, in three stages:
// plan (what leaves, within one budget for content and structuredContent
// together), publish (store each part that leaves, with its preview and
// link) and assemble (write the result with them in place).
func (f *Rewriter) rewriteResult(ctx context.Context, c Call, result []byte) ([]byte, []artifact.Artifact, error) {
	r, ok := f.planResult(result)
	if !ok {
		return result, nil, nil
	}
	w := &resultWriter{f: f, c: c, previewBudget: r.previewBudget}
	if err := w.publishResult(ctx, r); err != nil {
		return f.withhold(c, result, w.stored, err)
	}
	out, changed := w.assemble(r)
	if !changed {
		return result, w.stored, nil // the policy kept everything inline
	}
	return out, w.stored, nil
}

// rewriteContents is Rewrite for a resources/read result: each item of
// contents is offloaded on its own (item), over its kind's threshold, as
// such a result has no budget.
func (f *Rewriter) rewriteContents(ctx context.Context, c Call, result []byte) ([]byte, []artifact.Artifact, error) {
	arr, ok := jsonrpc.Member(result, "contents")
	if !ok || result[arr[0]] != '[' {
		return result, nil, nil
	}
	var out []byte
	var stored []artifact.Artifact
	last := 0
	for _, it := range jsonrpc.Elements(result, arr) {
		repl, a, err := f.item(ctx, c, result[it[0]:it[1]])
		if err != nil {
			if f.o.FailClosed || f.budget.over(f.lit.rawLen(result[it[0]:it[1]])) {
				f.log.Error("offload failed; withholding the result", "method", c.Method, "uri", c.URI, "err", err)
				return nil, stored, ErrWithheld
			}
			f.log.Warn("offload failed; the item stays inline", "method", c.Method, "uri", c.URI, "err", err)
			continue
		}
		if repl == nil {
			continue
		}
		stored = append(stored, a)
		out = append(out, result[last:it[0]]...)
		out = append(out, repl...)
		last = it[1]
	}
	if out == nil {
		return result, nil, nil
	}
	return append(out, result[last:]...), stored, nil
}

// item offloads one resources/read item, it, in the same three stages
// as a tools/call result: resourceUnit (plan), publish, resourceItem
// (assemble). It returns nil to keep the item as it is.
func (f *Rewriter) item(ctx context.Context, c Call, it []byte) ([]byte, artifact.Artifact, error) {
	u, ok := f.resourceUnit(it)
	if !ok {
		return nil, artifact.Artifact{}, nil
	}
	w := &resultWriter{f: f, c: c, previewBudget: f.budget.Previews}
	pub, err := w.publish(ctx, u, "")
	if err != nil || pub == nil {
		return nil, artifact.Artifact{}, err
	}
	return resourceItem(it, pub.text, pub.resourceLink()), pub.a, nil
}

// withhold ends a rewrite whose store failed: a result over the budget,
// or any with FailClosed, becomes a tool error; otherwise the result
// passes as it came.
func (f *Rewriter) withhold(c Call, result []byte, stored []artifact.Artifact, err error) ([]byte, []artifact.Artifact, error) {
	if size := f.lit.rawLen(result); f.o.FailClosed || f.budget.over(size) {
		f.log.Error("offload failed; withholding the result", "method", c.Method, "tool", c.Tool, "bytes", size, "err", err)
		return withheld(size), stored, nil
	}
	f.log.Warn("offload failed; the result passes inline", "method", c.Method, "tool", c.Tool, "err", err)
	return result, stored, nil
}

// withheld is the tools/call result that replaces one of size bytes
// (as the client would have received it) that could not be stored.
func withheld(size int64) []byte {
	text := "The tool's result (" + humanSize(size) + ") is too large to return inline and could not be stored for download; try again later."
	b, _ := json.Marshal(text)
	return []byte(`{"content":[{"type":"text","text":` + string(b) + `}],"isError":true}`)
}

// Spent releases the spilled strings of result that rewritten (what
// Rewrite returned for it, which the caller keeps) no longer contains.
// Their bytes are in the store now, and keeping them on disk until they
// expire would count them twice against the spill space. Call it once
// rewritten has replaced result for good.
func (f *Rewriter) Spent(result, rewritten []byte) {
	if f.lit.s == nil || f.lit.rawLen(result) == int64(len(result)) {
		return
	}
	f.lit.spilledValues(result, "", 0, func(sp [2]int, _ string) {
		if lit := result[sp[0]:sp[1]]; !bytes.Contains(rewritten, lit) {
			f.lit.s.Release(lit)
		}
	})
}
