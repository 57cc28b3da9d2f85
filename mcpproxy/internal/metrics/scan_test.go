package metrics

import (
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// k is the key of the id spelled id.
func k(id string) string { return jsonrpc.Key([]byte(id)) }

func TestScanner(t *testing.T) {
	big := strings.Repeat("x", 3*maxPrefix)
	for _, tt := range []struct {
		name   string
		sse    bool
		chunks []string
		want   []answer
	}{
		{"json result", false, []string{`{"jsonrpc":"2.0","id":1,"result":{}}`}, []answer{{id: k("1")}}},
		{"json error", false, []string{`{"jsonrpc":"2.0","id":"a","error":{"code":-32006,"message":"denied","data":{"x":[1]}}}`},
			[]answer{{id: k(`"a"`), isErr: true, code: -32006, message: "denied"}}},
		{"result first, id cut off", false, []string{`{"result":{"content":[{"type":"text","text":"` + big + `"}]},"id":7}`}, []answer{{}}},
		{"batch", false, []string{`[{"id":1,"result":1},{"id":2,"error":{"message":"m","code":-1}}]`},
			[]answer{{id: k("1")}, {id: k("2"), isErr: true, code: -1, message: "m"}}},
		{"request is no answer", false, []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`}, nil},
		{"not json", false, []string{`Forbidden`}, nil},
		{"sse, split anywhere", true, []string{"id: 1\nretry: 1000\ndata:\n\nda", "ta: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n", "data: {\"id\":3,\r\n", "data: \"error\":{\"code\":-32000,\"message\":\"upstream MCP server exited\"}}\r\n\r\n"},
			[]answer{{id: k("3"), isErr: true, code: -32000, message: "upstream MCP server exited"}}},
		{"sse, a long line", true, []string{"data: {\"id\":1,\"result\":{\"t\":\"" + big, big + "\"}}\n\n"}, []answer{{id: k("1")}}},
		{"sse, no blank line at the end", true, []string{"data: {\"id\":1,\"result\":{}}\n"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := &scanner{sse: tt.sse}
			for _, c := range tt.chunks {
				s.write([]byte(c))
			}
			s.end()
			if len(s.answers) != len(tt.want) {
				t.Fatalf("answers = %+v, want %+v", s.answers, tt.want)
			}
			for i := range tt.want {
				if s.answers[i] != tt.want[i] {
					t.Errorf("answer %d = %+v, want %+v", i, s.answers[i], tt.want[i])
				}
			}
			if len(s.line) > maxPrefix || len(s.data) > maxPrefix || len(s.body) > maxPrefix {
				t.Errorf("kept %d, %d, %d bytes; want at most %d each", len(s.line), len(s.data), len(s.body), maxPrefix)
			}
		})
	}
}

// FuzzScanner: whatever an upstream sends through a face, the scanner
// neither panics nor keeps more than its bound.
func FuzzScanner(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), false, 7)
	f.Add([]byte("data: {\"id\":1,\"error\":{\"code\":-32000,\"message\":\"x\"}}\r\n\r\n"), true, 3)
	f.Add([]byte(`[{"id":1,"error":{"code":"x","message":1}},{"id":[],"result":null}`), false, 1)
	f.Add([]byte("data: {\"error\":[{\n\ndata: }}}\n\n"), true, 2)
	f.Fuzz(func(t *testing.T, b []byte, sse bool, chunk int) {
		s := &scanner{sse: sse}
		chunk = max(chunk%64, 1)
		for len(b) > 0 {
			n := min(chunk, len(b))
			s.write(b[:n])
			b = b[n:]
		}
		s.end()
		if len(s.line) > maxPrefix || len(s.data) > maxPrefix || len(s.body) > maxPrefix {
			t.Fatalf("kept %d, %d, %d bytes", len(s.line), len(s.data), len(s.body))
		}
	})
}
