package offload

import (
	"sync"

	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/shrink"
)

// Schemas holds the outputSchema of each tool of one upstream, as the
// proxy presents it to clients (see Present). The zero value is ready;
// it is safe for concurrent use. Tools are keyed by name across
// sessions: an upstream that shows different sessions different schemas
// for one name gets the last listed; a rewrite that does not validate
// against it falls back (see Rewriter.Rewrite).
type Schemas struct {
	mu     sync.Mutex
	byTool map[string]*toolSchema
}

type toolSchema struct {
	raw  []byte
	once sync.Once
	s    *shrink.Schema
	err  error
}

// maxTools bounds what one upstream's listings may make the proxy hold.
const maxTools = 10000

// Present returns a tools/list result as the proxy shows it to clients,
// and learns each tool's outputSchema from it. Where an outputSchema
// refuses members it does not name (additionalProperties or
// unevaluatedProperties), at its top or behind the $ref and allOf Zod
// and pydantic put there (see shrink.AddProperty), it gets an optional
// NoteMember string property, so that a shrunk structuredContent
// carrying the note stays valid; every other byte is kept. A result it
// cannot read is returned as it is.
func (s *Schemas) Present(result []byte) []byte {
	span, ok := jsonrpc.Member(result, "tools")
	if !ok || result[span[0]] != '[' {
		return result
	}
	type tool struct {
		name   string
		schema []byte // as presented; nil: none
	}
	var tools []tool
	var out []byte // nil until a schema is edited
	last := 0      // result[:last] is in out
	for _, el := range jsonrpc.Elements(result, span) {
		t := result[el[0]:el[1]]
		name := jsonrpc.StringMember(t, "name")
		if name == "" {
			continue
		}
		os, ok := jsonrpc.Member(t, "outputSchema")
		if !ok || t[os[0]] != '{' {
			tools = append(tools, tool{name, nil})
			continue
		}
		schema := t[os[0]:os[1]]
		if ns, changed := shrink.AddProperty(schema, NoteMember, noteProperty); changed {
			out = append(append(out, result[last:el[0]+os[0]]...), ns...)
			last, schema = el[0]+os[1], ns
		}
		tools = append(tools, tool{name, schema})
	}
	if out != nil {
		out = append(out, result[last:]...)
	} else {
		out = result
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byTool == nil {
		s.byTool = map[string]*toolSchema{}
	}
	for _, t := range tools { // a name listed twice: the last wins
		if _, known := s.byTool[t.name]; !known && len(s.byTool) >= maxTools {
			continue
		}
		s.byTool[t.name] = &toolSchema{raw: t.schema}
	}
	return out
}

var noteProperty = []byte(`{"type":"string","description":"Set by Spillway when the value is a shortened preview: what was moved out, and links to the full values."}`)

// Listed reports whether a tools/list result of the upstream named tool
// (among the first maxTools names learned).
func (s *Schemas) Listed(tool string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.byTool[tool]
	return ok
}

// Lookup returns the tool's schema as presented; nil when the tool has
// none or is unknown. err is set when the tool has one that does not
// compile (too large, too deep, a remote $ref): a client may still check
// results against it, so nothing shrunk can be shown to pass.
func (s *Schemas) Lookup(tool string) (sch *shrink.Schema, err error) {
	s.mu.Lock()
	t := s.byTool[tool]
	s.mu.Unlock()
	if t == nil || t.raw == nil {
		return nil, nil
	}
	t.once.Do(func() { t.s, t.err = shrink.Compile(t.raw) })
	return t.s, t.err
}
