package jsonrpc

import (
	"bytes"
	"strings"
	"testing"
)

func TestPeek(t *testing.T) {
	big := strings.Repeat("x", 1000)
	tests := []struct {
		name, msg        string
		head, tail       int
		id               string
		method, response bool
	}{
		{"id first (Go, Python SDKs)", `{"jsonrpc":"2.0","id":7,"result":{"t":"` + big + `"}}`, 40, 40, "7", false, true},
		{"id last (TypeScript SDK)", `{"result":{"t":"` + big + `"},"jsonrpc":"2.0","id":"a\"b"}`, 40, 40, `"a\"b"`, false, true},
		{"request", `{"jsonrpc":"2.0","method":"sampling/createMessage","id":3,"params":{"t":"` + big + `"}}`, 80, 20, "3", true, false},
		{"tail cut inside the id", `{"result":{"t":"` + big + `"},"id":12345}`, 10, 3, "", false, true},
		{"id inside the result is not the id", `{"result":{"t":"` + big + `","id":5}}`, 10, 40, "", false, true},
		{"escaped quote before the key", `{"result":{"t":"` + big + `\"id\":5}"}}`, 10, 40, "", false, true},
		{"error response", `{"jsonrpc":"2.0","id":-1.5e3,"error":{"code":1,"message":"` + big + `"}}`, 40, 10, "-1.5e3", false, true},
	}
	for _, tt := range tests {
		b := []byte(tt.msg)
		g := Peek(b[:tt.head], b[len(b)-tt.tail:])
		if string(g.ID) != tt.id || g.Method != tt.method || g.Response != tt.response {
			t.Errorf("%s: Peek = %+v (id %s)", tt.name, g, g.ID)
		}
	}
}

// FuzzPeek: whatever the cut, what Peek says of a valid message is what
// the decoder says of it.
func FuzzPeek(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"result":{},"jsonrpc":"2.0","id":"x\\"}`,
		`{"jsonrpc":"2.0","method":"m","id":"\\\"id\":2}"}`, `{"id":"a`} {
		f.Add([]byte(s), uint16(10), uint16(10))
	}
	f.Fuzz(func(t *testing.T, b []byte, h, tl uint16) {
		head := b[:min(int(h), len(b))]
		tail := b[len(b)-min(int(tl), len(b)):]
		g := Peek(head, tail)
		m, err := DecodeMessage(b)
		if err != nil {
			return
		}
		if g.Method && !m.HasMethod() || g.Response && m.HasMethod() {
			t.Fatalf("Peek(%q, %q) = %+v; the decoder says method %v", head, tail, g, m.HasMethod())
		}
		if id := tailID(tail); id != nil && !bytes.Equal(id, m.ID) {
			t.Fatalf("tail %q: id %s, the decoder says %s", tail, id, m.ID)
		}
		if id, ok := PeekID(head); ok && bytes.Count(b, []byte(`"id"`)) == 1 && !bytes.Equal(id, m.ID) {
			t.Fatalf("head %q: id %s, the decoder says %s", head, id, m.ID)
		}
	})
}
