package policy

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// The hand-built inputs must be exactly what OPA makes of the JSON tags.
func TestInputValues(t *testing.T) {
	art := ArtifactInfo{ID: "a", Name: "n.csv", MimeType: "text/csv", Size: 1 << 40, SHA256: "ff", Created: 1, Expires: -2, Tenant: "t", Source: "s"}
	for name, in := range map[string]input{
		"fetch zero": fetchInput{},
		"fetch full": fetchInput{
			Request:  Request{Method: "GET", Path: []string{"a", "x"}, Headers: map[string][]string{"range": {"bytes=0-1"}, "empty": {}, "nil": nil}, SourceAddress: "::1"},
			Token:    &TokenClaims{ID: "a", KeyID: "k", Method: "HEAD", NotBefore: 3, Expires: 4, CIDR: "10.0.0.0/8", Tenant: "t", Audience: "u"},
			Artifact: art, Now: 5,
		},
		"offload zero": offloadInput{},
		"offload full": filled[offloadInput](t), // every field, the ones added later too
		"mint zero":    mintInput{},
		"mint full":    mintInput{Artifact: art, Tenant: "t", Source: "api", RequestedTTLSeconds: 60, CIDR: "127.0.0.1/32", Audience: "a", Now: 9},
		"call zero":    callInput{},
		"call empty":   callInput{Arguments: map[string]any{}, Listing: true},
		"call full": callInput{Tenant: "t", Upstream: "db", Kind: "tool", Name: "query", Arguments: map[string]any{
			"query": "SELECT 1", "limit": 10.0, "big": json.Number("12345678901234567890"), "dry": true, "none": nil,
			"tags": []any{"a", 2.5}, "opts": map[string]any{"x": []any{}},
		}},
	} {
		got, err := in.value()
		if err != nil {
			t.Fatal(err)
		}
		want, err := ast.InterfaceToValue(in)
		if err != nil {
			t.Fatal(err)
		}
		if got.Compare(want) != 0 {
			t.Errorf("%s:\n got %v\nwant %v", name, got, want)
		}
	}
}

// filled returns a T whose every field (strings, integers, booleans) is
// set, so that a field added to T without its line in value() fails
// TestInputValues (over_budget once reached no policy).
func filled[T any](t *testing.T) T {
	var v T
	rv := reflect.ValueOf(&v).Elem()
	for i := range rv.NumField() {
		f := rv.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(rv.Type().Field(i).Name)
		case reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Map: // the claims
			f.Set(reflect.ValueOf(map[string]any{"sub": "alice", "groups": []any{"admins", 1.5}, "x": map[string]any{"y": nil, "z": false}}))
		default:
			t.Fatalf("filled: field %s of kind %s", rv.Type().Field(i).Name, f.Kind())
		}
	}
	return v
}
