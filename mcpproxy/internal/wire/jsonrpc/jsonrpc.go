// Package jsonrpc is the proxy's JSON-RPC 2.0 envelope: it decodes a
// message only as far as its envelope (method, id, and the spans of params,
// result and error in the raw bytes), builds the messages the proxy sends
// itself, and edits raw JSON in place (ids, progress tokens, _meta members)
// without re-encoding what it does not own.
//
// Everything here is a pure function of its input and safe for concurrent
// use. Decoding failures wrap ErrMalformed (a parse error, -32700) or are
// invalid requests (-32600).
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// JSON-RPC error codes the proxy produces itself.
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeUpstream is returned for a request whose upstream died or could
	// not be reached: the server-error range of JSON-RPC.
	CodeUpstream = -32000
)

// Message is one JSON-RPC message, decoded only as far as its envelope.
// ID, Params, Result and Error are sub-slices of Raw (nil when absent), so
// a 100 MB result is never copied to be looked at. Method is decoded.
//
// The proxy keeps params and results as raw JSON on purpose: the official
// SDK's typed structs drop fields they do not know, and everything the
// proxy does not own must reach the other side unchanged.
type Message struct {
	Raw    []byte
	ID     []byte
	Method string
	Params []byte
	Result []byte
	Error  []byte
	// Related, on a server request or notification an upstream sent, is
	// the id of the request whose response stream carried it (Streamable
	// HTTP sends what belongs to a call there), as that request went
	// upstream; nil when the transport does not say (stdio, a GET
	// stream). A copy made by a With method does not carry it.
	Related []byte
	// Local is set on an error response Spillway made itself
	// (ErrorResponse: an upstream unreachable, a connection that ended),
	// never on one read from a peer, which may look the same; WithID
	// keeps it.
	Local bool

	hasMethod          bool   // a "method" member was present
	id, params, result [2]int // spans of ID, Params and Result in Raw
}

// IsRequest reports whether m is a request (a method and an id).
func (m *Message) IsRequest() bool { return m.hasMethod && m.ID != nil }

// IsNotification reports whether m is a notification (a method, no id).
func (m *Message) IsNotification() bool { return m.hasMethod && m.ID == nil }

// IsResponse reports whether m answers a request.
func (m *Message) IsResponse() bool { return !m.hasMethod && (m.Result != nil || m.Error != nil) }

// NullIDText answers a request whose id is null (-32600): JSON-RPC lets
// one through, MCP does not, and its response could name no request.
const NullIDText = "Invalid Request: a request's id must be a string or a number, not null"

// ErrMalformed is wrapped by every decoding failure that is a parse error
// (-32700) rather than an invalid request (-32600).
var ErrMalformed = errors.New("malformed JSON")

// Decode parses one message or a batch. batch reports whether b was a JSON
// array. The returned messages alias b.
func Decode(b []byte) (msgs []*Message, batch bool, err error) {
	if !Valid(b) {
		return nil, false, ErrMalformed
	}
	i := SkipSpace(b, 0)
	if b[i] != '[' {
		m, err := decodeOne(b)
		if err != nil {
			return nil, false, err
		}
		return []*Message{m}, false, nil
	}
	i = SkipSpace(b, i+1)
	for b[i] != ']' {
		end := SkipValue(b, i)
		m, err := decodeOne(b[i:end])
		if err != nil {
			return nil, true, err
		}
		msgs = append(msgs, m)
		i = SkipSpace(b, end)
		if b[i] == ',' {
			i = SkipSpace(b, i+1)
		}
	}
	if len(msgs) == 0 {
		return nil, true, fmt.Errorf("empty batch")
	}
	return msgs, true, nil
}

// DecodeMessage parses exactly one message; a batch is an error.
func DecodeMessage(b []byte) (*Message, error) {
	if Valid(b) && b[SkipSpace(b, 0)] != '[' {
		return decodeOne(b) // without Decode's slice: one allocation less per message
	}
	msgs, batch, err := Decode(b)
	if err != nil {
		return nil, err
	}
	if batch {
		return nil, fmt.Errorf("batch where one message was expected")
	}
	return msgs[0], nil
}

// decodeOne reads the envelope of a single valid JSON value.
func decodeOne(b []byte) (*Message, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, fmt.Errorf("a message must be a JSON object")
	}
	m := &Message{Raw: b}
	version := ""
	i := SkipSpace(b, 1)
	for b[i] != '}' {
		kend := SkipValue(b, i)
		key, err := name(b[i:kend])
		if err != nil {
			return nil, err
		}
		i = SkipSpace(b, kend)
		i = SkipSpace(b, i+1) // ':'
		vend := SkipValue(b, i)
		if err := m.setMember(key, i, vend, &version); err != nil {
			return nil, err
		}
		i = SkipSpace(b, vend)
		if b[i] == ',' {
			i = SkipSpace(b, i+1)
		}
	}
	if err := m.check(version); err != nil {
		return nil, err
	}
	return m, nil
}

// setMember notes the envelope member called key, whose value is
// m.Raw[i:end], in m; the "jsonrpc" member's value in version. Members
// the envelope does not define are left in Raw as they are.
func (m *Message) setMember(key string, i, end int, version *string) error {
	v := m.Raw[i:end]
	var err error
	switch key {
	case "jsonrpc":
		if string(v) == `"2.0"` {
			*version = "2.0"
		} else if *version, err = Unquote(v); err != nil {
			return fmt.Errorf("jsonrpc must be \"2.0\"")
		}
	case "id":
		if v[0] != '"' && v[0] != '-' && (v[0] < '0' || v[0] > '9') {
			if string(v) != "null" {
				return fmt.Errorf("id must be a string or a number")
			}
		}
		m.ID, m.id = v, [2]int{i, end}
	case "method":
		if m.Method, err = Unquote(v); err != nil {
			return fmt.Errorf("method must be a string")
		}
		m.hasMethod = true
	case "params":
		switch {
		case v[0] == '{' || v[0] == '[':
			m.Params, m.params = v, [2]int{i, end}
		case string(v) == "null":
			// Absent: JSON-RPC lets params be omitted, and clients
			// that serialise an unset field write null. The bytes
			// pass on as they came; WithParams replaces the member.
			m.Params, m.params = nil, [2]int{}
		default:
			return fmt.Errorf("params must be an object or an array")
		}
	case "result":
		m.Result, m.result = v, [2]int{i, end}
	case "error":
		m.Error = v
	}
	return nil
}

// check reports why m, whose members are read, is not a JSON-RPC 2.0
// request, notification or response; nil when it is one.
func (m *Message) check(version string) error {
	switch {
	case version != "2.0":
		return fmt.Errorf("jsonrpc must be \"2.0\"")
	case m.hasMethod && (m.Result != nil || m.Error != nil):
		return fmt.Errorf("a message has either a method or a result")
	case !m.hasMethod && m.Result == nil && m.Error == nil:
		return fmt.Errorf("a message needs a method, a result or an error")
	case !m.hasMethod && m.ID == nil:
		return fmt.Errorf("a response needs an id")
	}
	return nil
}

// WithResult returns a copy of m's raw message with its result replaced by
// r; every other byte, unknown envelope fields included, is kept.
func (m *Message) WithResult(r []byte) *Message {
	raw := make([]byte, 0, len(m.Raw)-len(m.Result)+len(r))
	raw = append(raw, m.Raw[:m.result[0]]...)
	raw = append(raw, r...)
	raw = append(raw, m.Raw[m.result[1]:]...)
	n, err := decodeOne(raw)
	if err != nil {
		panic("jsonrpc: WithResult made invalid JSON: " + err.Error()) // r must be valid JSON
	}
	return n
}

// MustDecode decodes one message the program itself wrote (a constant, a
// test's input); it panics when s is not one.
func MustDecode(s string) *Message {
	m, err := DecodeMessage([]byte(s))
	if err != nil {
		panic("jsonrpc: MustDecode: " + err.Error())
	}
	return m
}

// Response builds a result message for id.
func Response(id []byte, result []byte) *Message {
	raw := make([]byte, 0, len(result)+len(id)+32)
	raw = append(raw, `{"jsonrpc":"2.0","id":`...)
	raw = append(raw, id...)
	raw = append(raw, `,"result":`...)
	raw = append(raw, result...)
	raw = append(raw, '}')
	m, err := decodeOne(raw)
	if err != nil {
		panic("jsonrpc: invalid result: " + err.Error())
	}
	return m
}

// ErrorResponse builds an error message for id (nil id → null).
func ErrorResponse(id []byte, code int, msg string) *Message {
	if id == nil {
		id = []byte("null")
	}
	text, _ := json.Marshal(msg)
	raw := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":%s}}`, id, code, text)
	m, _ := decodeOne(raw)
	m.Local = true
	return m
}

// Notification builds a notification message.
func Notification(method string, params any) *Message {
	raw, _ := json.Marshal(struct {
		V      string `json:"jsonrpc"`
		Method string `json:"method"`
		Params any    `json:"params,omitempty"`
	}{"2.0", method, params})
	m, _ := decodeOne(raw)
	return m
}

// ErrorCode returns the code of an error response, 0 if m is none.
func (m *Message) ErrorCode() int {
	if m.Error == nil {
		return 0
	}
	var e struct{ Code int }
	if json.Unmarshal(m.Error, &e) != nil {
		return 0
	}
	return e.Code
}

// HasMethod reports whether m carries a method (a request or a notification).
func (m *Message) HasMethod() bool { return m.hasMethod }

// Key turns an id into a map key, the same for ids a peer takes for the
// same: a number by its exact value, however spelt (1, 1.0, 10e-1 and 1E0
// are one id; 9007199254740993 and 9007199254740992 are two; no floating
// point is involved), a string by its decoded text ("a" and "\u0061").
// 1 and "1" are different ids, and null is only itself. A peer that
// re-encodes ids (a JavaScript server answers 1.0 with 1) is matched; the
// proxy still answers with the id bytes the client sent, which tables keep
// beside the key.
func Key(id []byte) string {
	id = bytes.TrimSpace(id)
	if len(id) >= 2 && id[0] == '"' && id[len(id)-1] == '"' {
		if s, err := Unquote(id); err == nil {
			return "s" + s
		}
	} else {
		var buf [64]byte // most ids' keys fit: no allocation but the string
		if k, ok := appendNumberKey(append(buf[:0], 'n'), id); ok {
			return string(k)
		}
	}
	return "r" + string(id) // null, or not an id at all: equal only to itself
}

// Respellable reports whether a peer that decodes id and encodes it again
// may write other bytes for it (1.0 as 1, "\u0061" as "a"): a number with
// a fraction, an exponent or a minus zero, a string with an escape. The
// proxy answers such an id with the bytes the client sent.
func Respellable(id []byte) bool {
	id = bytes.TrimSpace(id)
	if len(id) == 0 {
		return false
	}
	if id[0] == '"' {
		return bytes.IndexByte(id, '\\') >= 0
	}
	return bytes.ContainsAny(id, ".eE") || bytes.HasPrefix(id, []byte("-0"))
}

// appendNumberKey appends to dst the canonical form of the JSON number b:
// its significant digits without leading or trailing zeros, then "e" and
// the exponent ("-15e-1" for -1.50), or "0" for any zero. ok is false
// when b is not a JSON number, or its exponent is too large to be an id
// anyone means (such an id is keyed as it is spelt). It works in dst
// alone: Key, on every response a relay passes, makes one string and no
// other allocation.
func appendNumberKey(dst, b []byte) (key []byte, ok bool) {
	n, ok := splitNumber(b)
	if !ok {
		return dst, false
	}
	intDigits := bytes.TrimLeft(n.intDigits, "0")
	frac := n.frac
	if len(intDigits) == 0 {
		frac = bytes.TrimLeft(frac, "0")
	}
	if len(intDigits)+len(frac) == 0 {
		return append(dst, '0'), true // 0, -0, 0.0 and 0e9 are one id
	}
	// Trailing zeros, of the fraction and then of the integer, go into the
	// exponent.
	exp := n.exp
	k := len(frac)
	frac = bytes.TrimRight(frac, "0")
	exp += int64(k - len(frac))
	if len(frac) == 0 {
		k = len(intDigits)
		intDigits = bytes.TrimRight(intDigits, "0")
		exp += int64(k - len(intDigits))
	}
	if n.neg {
		dst = append(dst, '-')
	}
	dst = append(append(append(dst, intDigits...), frac...), 'e')
	return strconv.AppendInt(dst, exp, 10), true
}

// numParts is a JSON number in parts, as spelt: its value is
// (-)intDigits.frac × 10^exp, with exp counting the fraction's digits
// already (1.25e1 is 1, 25, -1).
type numParts struct {
	neg       bool
	intDigits []byte
	frac      []byte
	exp       int64
}

// splitNumber splits the JSON number b into its parts, aliasing b. ok is
// false when b is not exactly one JSON number, or its exponent is past
// ±2^40.
func splitNumber(b []byte) (n numParts, ok bool) {
	i := 0
	if n.neg = len(b) > 0 && b[0] == '-'; n.neg {
		i++
	}
	intEnd := digits(b, i)
	if intEnd == i || (b[i] == '0' && intEnd-i > 1) {
		return n, false
	}
	n.intDigits = b[i:intEnd]
	i = intEnd
	if i < len(b) && b[i] == '.' {
		end := digits(b, i+1)
		if end == i+1 {
			return n, false
		}
		n.frac = b[i+1 : end]
		n.exp -= int64(end - i - 1)
		i = end
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		from := i + 1
		if from < len(b) && (b[from] == '+' || b[from] == '-') {
			from++
		}
		end := digits(b, from)
		if end == from {
			return n, false
		}
		e, err := strconv.ParseInt(string(b[i+1:end]), 10, 64)
		if err != nil || e > 1<<40 || e < -1<<40 {
			return n, false
		}
		n.exp += e
		i = end
	}
	return n, i == len(b)
}

// WithID returns a copy of m carrying id instead of its own: the proxy
// renumbers requests when several clients share one upstream connection.
// A message without an id is returned as it is.
func (m *Message) WithID(id []byte) *Message {
	if m.ID == nil {
		return m
	}
	start, end := m.id[0], m.id[1]
	raw := make([]byte, 0, len(m.Raw)-len(m.ID)+len(id))
	raw = append(raw, m.Raw[:start]...)
	raw = append(raw, id...)
	raw = append(raw, m.Raw[end:]...)
	n, err := decodeOne(raw)
	if err != nil {
		panic("jsonrpc: withID made invalid JSON: " + err.Error())
	}
	n.Local = m.Local
	return n
}

// NumID formats a proxy-assigned id.
func NumID(n uint64) []byte { return strconv.AppendUint(nil, n, 10) }

// SkipSpace returns the index of the first non-space byte at or after i.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// SkipValue returns the end of the JSON value starting at b[i]. b must be
// valid JSON (checked once with Valid), so the scan need not validate.
func SkipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		for i++; ; i++ {
			switch b[i] {
			case '\\':
				i++
			case '"':
				return i + 1
			}
		}
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = SkipValue(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	default: // number, true, false, null
		for i < len(b) && !bytes.ContainsRune([]byte(" \t\r\n,]}"), rune(b[i])) {
			i++
		}
		return i
	}
}

// name decodes a member name, the envelope's own without a copy.
func name(lit []byte) (string, error) {
	if len(lit) >= 2 && lit[0] == '"' {
		switch string(lit[1 : len(lit)-1]) {
		case "jsonrpc":
			return "jsonrpc", nil
		case "id":
			return "id", nil
		case "method":
			return "method", nil
		case "params":
			return "params", nil
		case "result":
			return "result", nil
		case "error":
			return "error", nil
		}
	}
	return Unquote(lit)
}

// Unquote decodes a JSON string literal.
func Unquote(v []byte) (string, error) {
	if len(v) < 2 || v[0] != '"' {
		return "", fmt.Errorf("not a string")
	}
	if bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return string(v[1 : len(v)-1]), nil
	}
	// Escapes, or invalid UTF-8 that encoding/json turns into U+FFFD: decode
	// exactly as the rest of the stack will.
	var s string
	err := json.Unmarshal(v, &s)
	return s, err
}
