package artifact

import (
	"strings"
	"testing"
)

func TestCallBounded(t *testing.T) {
	for _, tt := range []struct {
		in, want Call
	}{
		{Call{Upstream: "big tool", Tool: "a\"b", RequestID: "7", Session: "s-1"}, Call{Upstream: "big_tool", Tool: "a_b", RequestID: "7", Session: "s-1"}},
		{Call{Upstream: "127.0.0.1:8081", Tool: "ns/query"}, Call{Upstream: "127.0.0.1:8081", Tool: "ns/query"}},
		{Call{RequestID: `"x y"`}, Call{RequestID: `"x_y"`}},
		{Call{RequestID: `"` + strings.Repeat("r", 40) + `"`}, Call{RequestID: `"` + strings.Repeat("r", 30) + `"`}},
		{Call{Tool: strings.Repeat("é", 40)}, Call{Tool: strings.Repeat("_", 32)}},
		{Call{TraceID: "4BF92F3577B34DA6A3CE929D0E0E4736", SpanID: "00f067aa0ba902b7"}, Call{SpanID: "00f067aa0ba902b7"}},
		{Call{TraceID: strings.Repeat("0", 32), SpanID: "00f067aa0ba902"}, Call{}},
	} {
		if got := tt.in.Bounded(); got != tt.want {
			t.Errorf("%+v.Bounded() = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

// FuzzCallBounded: whatever a call's fields hold, Bounded's answer is
// its own fixed point and Normalize accepts it.
func FuzzCallBounded(f *testing.F) {
	f.Add("up", "tool", `"id"`, "sess", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
	f.Add("\xff\xfe", "é", `"`, "", "", "")
	f.Fuzz(func(t *testing.T, up, tool, req, sess, trace, span string) {
		c := Call{Upstream: up, Tool: tool, RequestID: req, Session: sess, TraceID: trace, SpanID: span}.Bounded()
		if c.Bounded() != c {
			t.Fatalf("%+v is not a fixed point", c)
		}
		if _, err := Normalize(Artifact{ID: NewID(), Call: c}); err != nil {
			t.Fatal(err)
		}
	})
}
