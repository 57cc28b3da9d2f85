// Package mcpheader holds the HTTP header rules of the stateless era of
// MCP (revision 2026-07-28, SEP-2243): a request's method and name are
// mirrored into Mcp-Method and Mcp-Name, the tool arguments a tool's
// inputSchema marks with x-mcp-header into Mcp-Param-{Name}, and a value a
// header cannot carry as it is travels as =?base64?…?=. Set is the client
// side, Check and CheckParams the server side; Tools learns the
// x-mcp-header bindings from tools/list results.
//
// Everything here but Tools is a pure function of its input; all of it is
// safe for concurrent use.
package mcpheader

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// Header names.
const (
	ProtocolVersion = "Mcp-Protocol-Version"
	Method          = "Mcp-Method"
	Name            = "Mcp-Name"
	// ParamPrefix precedes the x-mcp-header name of a mirrored argument.
	ParamPrefix = "Mcp-Param-"
)

// FirstStateless is the first revision of the stateless era: from it on,
// requests carry their protocol version in _meta and the headers above.
const FirstStateless = "2026-07-28"

// Stateless reports whether protocol revision v is of the stateless era:
// a dated revision on or after FirstStateless. A revision whose name is
// not a date ("draft", "latest", "2026-7-28") is unknown and of no era:
// false here, so the faces treat it as they treat a session-era one, where
// initialize negotiates a revision both sides know. It is never taken for
// a revision newer than every date, as a string comparison would.
func Stateless(v string) bool { return AtLeast(v, FirstStateless) }

// Revision returns the date that names protocol revision v (YYYY-MM-DD,
// a real calendar date). ok is false for any other name: an unknown
// revision, which compares with nothing.
func Revision(v string) (date time.Time, ok bool) {
	y, m, d, ok := ymd(v)
	if !ok {
		return time.Time{}, false
	}
	return time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC), true
}

// AtLeast reports whether revision v is rev or a later one, comparing
// their dates; false when either is not a dated revision (see Revision).
// It runs on every request: dates spelt YYYY-MM-DD compare as strings.
func AtLeast(v, rev string) bool {
	_, _, _, ok1 := ymd(v)
	_, _, _, ok2 := ymd(rev)
	return ok1 && ok2 && v >= rev
}

// ymd reads a YYYY-MM-DD date that is a real calendar date.
func ymd(v string) (y, m, d int, ok bool) {
	if len(v) != len(time.DateOnly) || v[4] != '-' || v[7] != '-' {
		return 0, 0, 0, false
	}
	num := func(s string) int {
		n := 0
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return -1
			}
			n = n*10 + int(s[i]-'0')
		}
		return n
	}
	y, m, d = num(v[:4]), num(v[5:7]), num(v[8:])
	if y < 0 || m < 1 || m > 12 || d < 1 {
		return 0, 0, 0, false
	}
	days := [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[m]
	if m == 2 && y%4 == 0 && (y%100 != 0 || y%400 == 0) {
		days = 29
	}
	return y, m, d, d <= days
}

// CodeHeaderMismatch is the JSON-RPC error (HeaderMismatch) for headers
// that disagree with the body, are missing or hold invalid characters;
// it goes with HTTP 400.
const CodeHeaderMismatch = -32020

// Error is a request refused for its headers: Code is the JSON-RPC error
// code to answer with (with HTTP 400), Message says which header and why.
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return "mcpheader: " + e.Message }

func mismatch(format string, a ...any) *Error {
	return &Error{Code: CodeHeaderMismatch, Message: fmt.Sprintf(format, a...)}
}

// RoutingName returns what Mcp-Name carries for m: params.name of a
// tools/call or prompts/get, params.uri of a resources/read. ok is false
// for other methods, which have no Mcp-Name.
func RoutingName(m *jsonrpc.Message) (name string, ok bool) {
	switch m.Method {
	case "tools/call", "prompts/get":
		return jsonrpc.StringMember(m.Params, "name"), true
	case "resources/read":
		return jsonrpc.StringMember(m.Params, "uri"), true
	}
	return "", false
}

const (
	sentinelPrefix = "=?base64?"
	sentinelSuffix = "?="
)

// Encode returns s as a header value: as it is when it is visible ASCII
// with inner spaces only, else =?base64?{standard base64 of s}?=. A plain
// value that looks encoded is encoded too, so that it decodes to itself.
func Encode(s string) string {
	plain := s == strings.TrimSpace(s) && !(strings.HasPrefix(s, sentinelPrefix) && strings.HasSuffix(s, sentinelSuffix))
	for i := 0; plain && i < len(s); i++ {
		plain = s[i] >= 0x20 && s[i] <= 0x7e
	}
	if plain {
		return s
	}
	return sentinelPrefix + base64.StdEncoding.EncodeToString([]byte(s)) + sentinelSuffix
}

// Decode undoes Encode: a value between =?base64? and ?= is decoded
// (strict standard base64), anything else is taken as it is. It fails on
// bad base64, and on a value holding characters a header may not carry
// (anything but visible ASCII, space and tab).
func Decode(v string) (string, error) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c != '\t' && (c < 0x20 || c > 0x7e) {
			return "", fmt.Errorf("invalid character %q", c)
		}
	}
	if !strings.HasPrefix(v, sentinelPrefix) || !strings.HasSuffix(v, sentinelSuffix) || len(v) < len(sentinelPrefix)+len(sentinelSuffix) {
		return v, nil
	}
	b, err := base64.StdEncoding.Strict().DecodeString(v[len(sentinelPrefix) : len(v)-len(sentinelSuffix)])
	if err != nil {
		return "", fmt.Errorf("invalid base64")
	}
	return string(b), nil
}

// Set sets, on the headers of the POST carrying request m, what a
// stateless-era client sends: Mcp-Method, Mcp-Name where m's method has
// one (encoded as needed), and for a tools/call the Mcp-Param-* headers of
// the tool's bindings bs (nil when none or unknown).
func Set(h http.Header, m *jsonrpc.Message, bs []Binding) {
	if !m.HasMethod() {
		return
	}
	h.Set(Method, m.Method)
	if name, ok := RoutingName(m); ok {
		h.Set(Name, Encode(name))
	}
	if m.Method == "tools/call" {
		setParams(h, bs, m.Params)
	}
}

// Check validates the headers of request m as a server that reads the
// body must: Mcp-Protocol-Version against _meta's protocol version, and in
// the stateless era Mcp-Method and Mcp-Name (decoded) against the body.
// A notification, a response or a batch is not checked. It returns an
// *Error, or nil. The Mcp-Param-* headers need the tool's bindings: see
// CheckParams.
func Check(h http.Header, msgs []*jsonrpc.Message) error {
	if len(msgs) != 1 || !msgs[0].IsRequest() {
		return nil
	}
	m := msgs[0]
	header := h.Get(ProtocolVersion)
	meta := jsonrpc.MetaString(m, jsonrpc.MetaProtocolVersion)
	switch {
	case meta != "" && header == "":
		return mismatch("Mcp-Protocol-Version header is required")
	case Stateless(header) && meta == "":
		return &Error{Code: jsonrpc.CodeInvalidParams, Message: "missing or invalid _meta field " + jsonrpc.MetaProtocolVersion}
	case meta != "" && header != meta:
		return mismatch("Mcp-Protocol-Version header does not match _meta")
	}
	if !Stateless(header) {
		return nil
	}
	if got := h.Get(Method); got != m.Method {
		if got == "" {
			return mismatch("missing required Mcp-Method header")
		}
		return mismatch("Mcp-Method header does not match the body")
	}
	if name, ok := RoutingName(m); ok {
		if len(h.Values(Name)) == 0 {
			return mismatch("missing required Mcp-Name header")
		}
		got, err := Decode(h.Get(Name))
		if err != nil {
			return mismatch("Mcp-Name header: %v", err)
		}
		if got != name {
			return mismatch("Mcp-Name header does not match the body")
		}
	}
	return nil
}

// EnvelopeKeys are the stateless era's per-request _meta members: the
// revision, the client's capabilities and info, its log level. They are
// the party's that speaks that era, never a session-era upstream's.
var EnvelopeKeys = []string{jsonrpc.MetaProtocolVersion, jsonrpc.MetaClientCapabilities,
	"io.modelcontextprotocol/clientInfo", "io.modelcontextprotocol/logLevel"}

// StripEnvelope returns m without the EnvelopeKeys in its params' _meta;
// m itself when it has none to strip.
func StripEnvelope(m *jsonrpc.Message) *jsonrpc.Message {
	meta := jsonrpc.Path(m.Params, "_meta")
	if meta == nil {
		return m
	}
	var kept map[string]json.RawMessage
	if json.Unmarshal(meta, &kept) != nil {
		return m
	}
	n := len(kept)
	for _, k := range EnvelopeKeys {
		delete(kept, k)
	}
	if len(kept) == n {
		return m
	}
	b, _ := json.Marshal(kept)
	p, ok := jsonrpc.SetPath(m.Params, b, "_meta")
	if !ok {
		return m
	}
	return m.WithParams(p)
}
