package s3store

import (
	"testing"

	"github.com/spillway-dev/spillway/artifact"
)

// FuzzCallMeta: a call as stores keep it (Call.Bounded) comes back from
// its user metadata unchanged, within the room the other fields leave it
// under S3's 2 KB; and whatever the metadata holds, reading it never
// panics.
func FuzzCallMeta(f *testing.F) {
	f.Add("bigtool", "query", `"call-x"`, "7UDBE5QQ", "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "u=a&t=b")
	f.Add("", "", "", "", "", "", "%zz")
	f.Fuzz(func(t *testing.T, up, tool, req, sess, trace, span, raw string) {
		c := artifact.Call{Upstream: up, Tool: tool, RequestID: req, Session: sess, TraceID: trace, SpanID: span}.Bounded()
		enc := encodeCall(c)
		if len(enc) > 239 {
			t.Fatalf("%+v takes %d bytes of metadata, more than 239", c, len(enc))
		}
		if got, err := decodeCall(enc); err != nil || got != c {
			t.Fatalf("%+v came back as %+v, %v", c, got, err)
		}
		decodeCall(raw)
	})
}
