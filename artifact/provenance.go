package artifact

import (
	"strings"
)

// Call is the request that produced an artifact, stored with it (its
// provenance) so that every later read of its bytes can name it in an
// audit line: "who fetched the output of call X" is then one query.
//
// Every field is bounded and kept to characters that travel unchanged
// in an HTTP header and a JSON string, and need no escaping in a URL
// query's value (Bounded), so that
// the metadata of an artifact stays within what every store keeps (S3
// allows 2 KB of user metadata in all). The zero Call is an artifact of
// no recorded call: one stored before provenance existed, or uploaded
// through the management API.
type Call struct {
	// Upstream is the configured name of the server that answered.
	Upstream string `json:"upstream,omitempty"`
	// Tool is the tool's name as the client called it (tools/call).
	Tool string `json:"tool,omitempty"`
	// RequestID is the JSON-RPC request id as its JSON text: 7, or "a-b"
	// with its quotes.
	RequestID string `json:"request_id,omitempty"`
	// Session is the MCP session the request came on, if any.
	Session string `json:"session,omitempty"`
	// TraceID and SpanID name the request's span in the W3C form (32 and
	// 16 lower-case hex digits); empty when the request was not traced.
	TraceID string `json:"trace_id,omitempty"`
	SpanID  string `json:"span_id,omitempty"`
}

// Bounds of a Call's fields, in bytes.
const (
	maxCallUpstream = 40
	maxCallTool     = 64
	maxCallRequest  = 32
	maxCallSession  = 32
)

// Bounded returns c as stores keep it: Upstream, Tool and Session cut to
// their bounds (40, 64 and 32 bytes) with every byte outside
// [A-Za-z0-9._~:/-] replaced by '_'; RequestID the same within 32 bytes,
// keeping the quotes of a JSON string; TraceID and SpanID emptied unless
// they are 32 and 16 lower-case hex digits, not all zero. Normalize
// refuses a Call that Bounded would change.
func (c Call) Bounded() Call {
	c.Upstream = safeField(c.Upstream, maxCallUpstream)
	c.Tool = safeField(c.Tool, maxCallTool)
	c.Session = safeField(c.Session, maxCallSession)
	if r := c.RequestID; len(r) >= 2 && r[0] == '"' && r[len(r)-1] == '"' {
		c.RequestID = `"` + safeField(r[1:len(r)-1], maxCallRequest-2) + `"`
	} else {
		c.RequestID = safeField(r, maxCallRequest)
	}
	if !lowerHex(c.TraceID, 32) {
		c.TraceID = ""
	}
	if !lowerHex(c.SpanID, 16) {
		c.SpanID = ""
	}
	return c
}

// safeField cuts s to max bytes and replaces every byte outside
// [A-Za-z0-9._~:/-] with '_': what names an upstream (a host:port, a
// program) or a tool, and what a URL query's value holds unescaped.
func safeField(s string, max int) string {
	if len(s) > max {
		s = s[:max]
	}
	for i := 0; i < len(s); i++ {
		if !safeByte(s[i]) {
			return strings.Map(func(r rune) rune {
				if r < 0x80 && safeByte(byte(r)) {
					return r
				}
				return '_'
			}, s)
		}
	}
	return s
}

func safeByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '.' || c == '_' || c == '~' || c == '-' || c == ':' || c == '/'
}

// lowerHex reports whether s is n lower-case hex digits, not all zero (W3C
// trace context's invalid id).
func lowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	zero := true
	for i := 0; i < n; i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
		zero = zero && c == '0'
	}
	return !zero
}
