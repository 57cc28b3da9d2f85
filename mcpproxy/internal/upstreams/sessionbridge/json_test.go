package sessionbridge

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestWithoutMembers(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"content":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}`, `{"content":[]}`},
		{`{"resultType":"complete","content":[1]}`, `{"content":[1]}`},
		{`{ "a" : 1 , "ttlMs" : 5 , "b" : {"ttlMs":1} }`, `{"a" : 1,"b" : {"ttlMs":1}}`},
		{`{"resultType":"complete"}`, `{}`},
		{`{"content":[]}`, `{"content":[]}`},
		{`{}`, `{}`},
		{`[1]`, `[1]`},
		{`{"result\u0054ype":"x","a":"}"}`, `{"a":"}"}`},
	} {
		if got := string(withoutMembers([]byte(tc.in), "resultType", "ttlMs", "cacheScope")); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.in, got, tc.want)
		}
	}
}

// FuzzWithoutMembers: on any valid JSON the result is valid JSON, and an
// object keeps every member but the ones removed.
func FuzzWithoutMembers(f *testing.F) {
	for _, s := range []string{`{"a":1,"resultType":"x"}`, `{}`, `[]`, `"s"`, `{"ttlMs":{"x":[1,2]},"b":"\"}"}`, ` { "cacheScope" : null } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		out := withoutMembers(b, "resultType", "ttlMs", "cacheScope")
		if !json.Valid(out) {
			t.Fatalf("%q became invalid: %q", b, out)
		}
		var in, got map[string]any
		if json.Unmarshal(b, &in) != nil {
			return
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		delete(in, "resultType")
		delete(in, "ttlMs")
		delete(in, "cacheScope")
		if !reflect.DeepEqual(in, got) {
			t.Fatalf("%q: got %v, want %v", b, got, in)
		}
	})
}
