package mcpheader

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"
)

// ListFunc lists one page of an upstream's tools: it returns the result of
// tools/list for cursor ("" for the first page).
type ListFunc func(ctx context.Context, cursor string) (result []byte, err error)

// Tools remembers each tool's x-mcp-header bindings, learned from
// tools/list results. A server that reads bodies needs them to check a
// tools/call's Mcp-Param-* headers, a client to set them. The zero value
// is ready; it is safe for concurrent use.
type Tools struct {
	mu      sync.Mutex
	byTool  map[string][]Binding
	listing chan struct{} // closed when the listing in flight ends; nil if none
	listed  time.Time     // when the last listing ended
}

// Lookup returns tool's bindings; ok is false when the tool is unknown.
func (t *Tools) Lookup(tool string) (bs []Binding, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	bs, ok = t.byTool[tool]
	return bs, ok
}

// Learn records the bindings of every tool in a tools/list result and
// returns its nextCursor. An x-mcp-header whose name is not an HTTP token
// binds nothing: no valid header could carry it.
func (t *Tools) Learn(result []byte) (nextCursor string) {
	var r struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
		NextCursor string `json:"nextCursor"`
	}
	if json.Unmarshal(result, &r) != nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.byTool == nil {
		t.byTool = map[string][]Binding{}
	}
	for _, tool := range r.Tools {
		t.byTool[tool.Name] = bindings(tool.InputSchema)
	}
	return r.NextCursor
}

// Ensure makes sure tool's bindings are known before its call is checked:
// when it is unknown, it lists the tools (every page, up to 20) with list,
// unless a listing ended less than a second ago. Concurrent callers share
// one listing and each waits for it, until ctx ends. Errors leave the
// tool unknown.
func (t *Tools) Ensure(ctx context.Context, tool string, list ListFunc) {
	t.mu.Lock()
	if _, ok := t.byTool[tool]; ok {
		t.mu.Unlock()
		return
	}
	if wait := t.listing; wait != nil {
		t.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
		}
		return
	}
	if time.Since(t.listed) < time.Second {
		t.mu.Unlock()
		return
	}
	done := make(chan struct{})
	t.listing = done
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		t.listing, t.listed = nil, time.Now()
		t.mu.Unlock()
		close(done)
	}()
	cursor := ""
	for page := 0; page < 20; page++ {
		result, err := list(ctx, cursor)
		if err != nil {
			return
		}
		if cursor = t.Learn(result); cursor == "" {
			return
		}
	}
}

type schemaProp struct {
	XMCPHeader json.RawMessage       `json:"x-mcp-header"`
	Properties map[string]schemaProp `json:"properties"`
}

// bindings collects the x-mcp-header annotations of an inputSchema
// reachable through "properties" alone, as the spec allows them.
func bindings(schema json.RawMessage) []Binding {
	var s schemaProp
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	return collect(s.Properties, nil, nil)
}

func collect(props map[string]schemaProp, prefix []string, out []Binding) []Binding {
	for name, p := range props {
		path := append(append([]string(nil), prefix...), name)
		var h string
		if json.Unmarshal(p.XMCPHeader, &h) == nil && isToken(h) {
			out = append(out, Binding{Path: path, Header: h})
		}
		out = collect(p.Properties, path, out)
	}
	return out
}

// isToken: RFC 9110's token, what a header name is made of.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c < 0x7f && c > 0x20 && strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
