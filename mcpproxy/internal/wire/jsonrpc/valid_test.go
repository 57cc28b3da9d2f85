package jsonrpc

import (
	"encoding/json"
	"strings"
	"testing"
)

// validCases are inputs on every edge of the grammar; TestValid and
// FuzzValid's seeds hold Valid to encoding/json.Valid on each.
var validCases = []string{
	``, ` `, `1`, ` 1 `, "\t\r\n1\n", `-`, `-0`, `-01`, `01`, `0`, `0.`, `0.5`, `.5`, `1e5`, `1E+5`, `1e-05`,
	`1e`, `1e+`, `1.e5`, `-1.5e-3`, `1 2`, `+1`, `0x1`, `1,`, `Infinity`, `NaN`,
	`true`, `false`, `null`, `tru`, `nul`, `truex`, `True`, `nullnull`,
	`""`, `"a"`, `"`, `"a`, `"\"`, `"\\"`, `"\/"`, `"\b\f\n\r\t"`, `"\x"`, `"\u00e9"`, `"\u00g9"`, `"\u00e"`,
	`"\uD800"`, "\"\xff\xfe\"", "\"\x00\"", "\"\x1f\"", "\"\x7f\"", "\"a\nb\"", `"é"`,
	`{}`, `{ }`, `[]`, `[ ]`, `{"a":1}`, `{"a" : 1 , "b" : [1, 2]}`, `{"a":1,}`, `{,}`, `{"a"}`, `{"a":}`,
	`{1:2}`, `{"a":1 "b":2}`, `[1,]`, `[,1]`, `[1 2]`, `[1,,2]`, `[`, `]`, `{`, `}`, `[}`, `{]`, `[[]]`, `[[]`,
	`[{}]`, `{"a":{"b":[{}]}}`, `{"a":[}`, `[1]]`, `{"a":1}}`, `{"a":1}{"b":2}`, `[] []`,
	"\xef\xbb\xbf{}", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}`,
	`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok \u00e9 \"x\""}],"isError":false}}`,
}

// TestValid: Valid answers as encoding/json.Valid does, on the edges of
// the grammar and of the nesting limit (10000 levels pass, 10001 do not,
// empty or not).
func TestValid(t *testing.T) {
	cases := append([]string(nil), validCases...)
	for _, d := range []int{63, 64, 65, 9999, 10000, 10001} {
		cases = append(cases, strings.Repeat("[", d)+strings.Repeat("]", d),
			strings.Repeat(`{"a":`, d)+"1"+strings.Repeat("}", d),
			strings.Repeat("[", d)+strings.Repeat("]", d-1))
	}
	for _, c := range cases {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%.60q) = %v, encoding/json says %v", c, got, want)
		}
	}
	if !Valid([]byte(strings.Repeat("[", 10000) + strings.Repeat("]", 10000))) {
		t.Error("10000 levels refused")
	}
	if Valid([]byte(strings.Repeat("[", 10001) + strings.Repeat("]", 10001))) {
		t.Error("10001 levels accepted")
	}
}

// FuzzValid: Valid and encoding/json.Valid agree on every input.
func FuzzValid(f *testing.F) {
	for _, c := range validCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, got, want)
		}
	})
}

// BenchmarkValid: a small tools/call result, as the relay sees each one.
func BenchmarkValid(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok ` + strings.Repeat("x", 200) + `"}],"isError":false}}`)
	for _, v := range []struct {
		name  string
		valid func([]byte) bool
	}{{"jsonrpc", Valid}, {"encoding_json", json.Valid}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				if !v.valid(msg) {
					b.Fatal("invalid")
				}
			}
		})
	}
}
