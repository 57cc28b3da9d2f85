package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Claims reach every decision that takes them as OPA would convert them,
// whatever JSON they hold; claims past the bounds fail the decision.
func TestClaimsInput(t *testing.T) {
	var claims map[string]any
	json.Unmarshal([]byte(`{"sub":"alice","groups":["admins","ops"],"n":1e300,"i":-3,"ok":true,"none":null,
		"nested":{"a":[{"b":[1,2,{"c":"d"}]}]},"empty":{},"list":[]}`), &claims)
	for name, in := range map[string]input{
		"call":                callInput{Tenant: "t", Claims: claims},
		"offload":             offloadInput{Method: "tools/call", Claims: claims},
		"mint":                mintInput{Source: "offload", Claims: claims},
		"call, typed numbers": callInput{Claims: map[string]any{"a": 3, "b": int64(-4), "c": json.Number("12345678901234567890")}},
	} {
		got, err := in.value()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, err := ast.InterfaceToValue(in)
		if err != nil {
			t.Fatal(err)
		}
		if got.Compare(want) != 0 {
			t.Errorf("%s:\n got %v\nwant %v", name, got, want)
		}
	}
	deep := any("leaf")
	for range maxClaimsDepth + 1 {
		deep = []any{deep}
	}
	wide := make([]any, maxClaimsValues)
	for _, tt := range []struct {
		name   string
		claims map[string]any
		want   string
	}{
		{"deep", map[string]any{"d": deep}, "nested over"},
		{"wide", map[string]any{"w": wide}, "over 4096 values"},
		{"not JSON", map[string]any{"f": func() {}}, "a value of type func()"},
	} {
		_, err := callInput{Claims: tt.claims}.value()
		if !errors.Is(err, ErrClaims) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, err, tt.want)
		}
	}
	ok := any("leaf")
	for range maxClaimsDepth - 1 {
		ok = []any{ok}
	}
	if _, err := (callInput{Claims: map[string]any{"d": ok, "w": wide[:maxClaimsValues-maxClaimsDepth-2]}}).value(); err != nil {
		t.Errorf("claims within the bounds: %v", err)
	}
}
