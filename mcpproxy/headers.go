package mcpproxy

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/mcpheader"
)

// listTools lists pe's tools for mcpheader.Tools, one page per call, with
// the caller's _meta (a stateless request needs it). A page the upstream
// does not answer within 5 s is cancelled upstream.
func listTools(pe *peer, meta json.RawMessage) mcpheader.ListFunc {
	return func(ctx context.Context, cursor string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		params := map[string]any{"_meta": meta}
		if cursor != "" {
			params["cursor"] = cursor
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": params})
		req, err := jsonrpc.DecodeMessage(b)
		if err != nil {
			return nil, err
		}
		st := newStream(nil)
		defer st.close()
		w, err := pe.call(ctx, req, nil, st)
		if err != nil {
			return nil, err
		}
		select {
		case d := <-st.ch:
			if d.m.Result == nil {
				return nil, errors.New("tools/list failed")
			}
			return d.m.Result, nil
		case <-ctx.Done():
			pe.cancel(w, "tools/list timed out")
			return nil, ctx.Err()
		}
	}
}
