// Package schematest checks, in tests, that a JSON-RPC result is valid
// against the MCP specification's JSON schema for its revision: the
// result definitions a client's SDK validates (ReadResourceResult,
// ListResourcesResult, …), required fields included.
//
// The schemas under schemas/ are the specification's schema.json of each
// revision as the official conformance suite carries them
// (@modelcontextprotocol/conformance 0.2.0-alpha.12, dist/index.js, the
// map from revision to schema), minified; regenerate them with the same
// package when a revision changes. Only revisions whose schema is JSON
// Schema 2020-12 are here (2025-11-25 and 2026-07-28).
package schematest

import (
	"embed"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
)

//go:embed schemas/*.json
var schemas embed.FS

var (
	mu       sync.Mutex
	resolved = map[string]*jsonschema.Resolved{} // "version/def"
)

// schema returns the resolved definition def of revision version.
func schema(version, def string) (*jsonschema.Resolved, error) {
	mu.Lock()
	defer mu.Unlock()
	if rs, ok := resolved[version+"/"+def]; ok {
		return rs, nil
	}
	b, err := schemas.ReadFile("schemas/schema-" + version + ".json")
	if err != nil {
		return nil, fmt.Errorf("no schema for revision %s", version)
	}
	var full struct {
		Defs json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(b, &full); err != nil {
		return nil, err
	}
	ref, _ := json.Marshal("#/$defs/" + def)
	root := fmt.Appendf(nil, `{"$schema":"https://json-schema.org/draft/2020-12/schema","$ref":%s,"$defs":%s}`, ref, full.Defs)
	var s jsonschema.Schema
	if err := json.Unmarshal(root, &s); err != nil {
		return nil, err
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("revision %s: %w", version, err)
	}
	resolved[version+"/"+def] = rs
	return rs, nil
}

// Validate reports whether raw is a valid def (e.g. "ReadResourceResult")
// of revision version ("2025-11-25" or "2026-07-28").
func Validate(version, def string, raw []byte) error {
	rs, err := schema(version, def)
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	return rs.Validate(v)
}

// Check fails t unless raw is a valid def of revision version.
func Check(t testing.TB, version, def string, raw []byte) {
	t.Helper()
	if err := Validate(version, def, raw); err != nil {
		t.Errorf("not a valid %s %s: %v\n%.2000s", version, def, err, raw)
	}
}
