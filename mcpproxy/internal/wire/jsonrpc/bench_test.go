package jsonrpc

import (
	"strings"
	"testing"
)

// BenchmarkDecodeMessage decodes the envelope of a request and of a small
// result, as a relay does for every message it passes.
func BenchmarkDecodeMessage(b *testing.B) {
	for _, c := range []struct{ name, msg string }{
		{"request", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":3}}}`},
		{"result", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"ok ` + strings.Repeat("x", 200) + `"}],"isError":false}}`},
	} {
		msg := []byte(c.msg)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeMessage(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkKey keys ids as tables do for every response: a small integer,
// a number spelt with a fraction and exponent, and a string.
func BenchmarkKey(b *testing.B) {
	for _, c := range []struct{ name, id string }{
		{"int", `12345`}, {"float", `-1.2500e+3`}, {"string", `"req-42"`},
	} {
		id := []byte(c.id)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Key(id)
			}
		})
	}
}
