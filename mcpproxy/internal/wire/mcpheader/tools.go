package mcpheader

import (
	"encoding/json"
	"strings"
	"sync"
)

// Tools remembers each tool's x-mcp-header bindings, learned from
// tools/list results: the clients' own, and the proxy's listings of a
// tool it has not seen (ownmethods.Methods.EnsureTool, whose one listing
// teaches the outputSchema too). A server that reads bodies needs them
// to check a tools/call's Mcp-Param-* headers, a client to set them. The
// zero value is ready; it is safe for concurrent use.
type Tools struct {
	mu     sync.Mutex
	byTool map[string][]Binding
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
