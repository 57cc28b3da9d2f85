package jsonrpc

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// The functions below read and edit raw JSON that has already been
// checked with Valid (every decoded Message is): they scan without
// validating, and never re-encode what they do not touch.

// Member finds key among the top-level members of the JSON object obj and
// returns the span of its value. The last duplicate wins, as in
// encoding/json. ok is false when obj is not an object or lacks key.
func Member(obj []byte, key string) (span [2]int, ok bool) {
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return [2]int{}, false
	}
	for i = SkipSpace(obj, i+1); i < len(obj) && obj[i] != '}'; {
		kend := SkipValue(obj, i)
		is, err := keyIs(obj[i:kend], key)
		if err != nil {
			return [2]int{}, false
		}
		i = SkipSpace(obj, SkipSpace(obj, kend)+1)
		vend := SkipValue(obj, i)
		if is {
			span, ok = [2]int{i, vend}, true
		}
		i = SkipSpace(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = SkipSpace(obj, i+1)
		}
	}
	return span, ok
}

// keyIs reports whether the member name lit (a string literal) is key,
// without decoding a name that has no escape (the hot case: no copy).
func keyIs(lit []byte, key string) (bool, error) {
	if len(lit) >= 2 && lit[0] == '"' && bytes.IndexByte(lit, '\\') < 0 {
		if string(lit[1:len(lit)-1]) == key {
			return true, nil
		}
		if utf8.Valid(lit) {
			return false, nil // decoding would change nothing
		}
	}
	k, err := Unquote(lit)
	return k == key, err
}

// RawMember returns the raw value of obj's member key, nil when absent.
func RawMember(obj []byte, key string) []byte {
	if s, ok := Member(obj, key); ok {
		return obj[s[0]:s[1]]
	}
	return nil
}

// StringMember returns obj's member key when it is a string, else "".
func StringMember(obj []byte, key string) string {
	v := RawMember(obj, key)
	if len(v) == 0 || v[0] != '"' {
		return ""
	}
	s, _ := Unquote(v)
	return s
}

// Path returns the raw value at a path of object members, nil when any
// step is missing or not an object.
func Path(obj []byte, keys ...string) []byte {
	for _, k := range keys {
		if obj = RawMember(obj, k); obj == nil {
			return nil
		}
	}
	return obj
}

// Elements returns the spans of the elements of the array at span in b.
func Elements(b []byte, span [2]int) [][2]int {
	var out [][2]int
	i := SkipSpace(b, span[0]+1)
	for i < span[1] && b[i] != ']' {
		end := SkipValue(b, i)
		out = append(out, [2]int{i, end})
		i = SkipSpace(b, end)
		if b[i] == ',' {
			i = SkipSpace(b, i+1)
		}
	}
	return out
}

// SetPath returns a copy of obj with the value at the path of object
// members replaced by v (valid JSON), creating missing objects on the way.
// ok is false when obj or a step on the path is not an object.
func SetPath(obj []byte, v []byte, keys ...string) (out []byte, ok bool) {
	if len(keys) == 0 {
		return v, true
	}
	i := SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, false
	}
	if span, found := Member(obj, keys[0]); found {
		inner, ok := SetPath(obj[span[0]:span[1]], v, keys[1:]...)
		if !ok {
			return nil, false
		}
		return splice(obj, span, inner), true
	}
	inner, _ := SetPath([]byte(`{}`), v, keys[1:]...)
	key, _ := json.Marshal(keys[0])
	member := append(append(key, ':'), inner...)
	end := bytes.LastIndexByte(obj, '}')
	if SkipSpace(obj, i+1) != end { // not empty: a comma before the new member
		member = append([]byte{','}, member...)
	}
	return splice(obj, [2]int{end, end}, member), true
}

// splice returns b with b[span] replaced by v, in a new slice.
func splice(b []byte, span [2]int, v []byte) []byte {
	out := make([]byte, 0, len(b)-(span[1]-span[0])+len(v))
	out = append(out, b[:span[0]]...)
	out = append(out, v...)
	return append(out, b[span[1]:]...)
}

// WithParams returns a copy of m (a request or notification) with its
// params replaced by p, valid JSON. Every other byte is kept.
func (m *Message) WithParams(p []byte) *Message {
	if m.Params == nil {
		raw, _ := SetPath(m.Raw, p, "params")
		n, err := decodeOne(raw)
		if err != nil {
			panic("jsonrpc: WithParams made invalid JSON: " + err.Error())
		}
		return n
	}
	n, err := decodeOne(splice(m.Raw, m.params, p))
	if err != nil {
		panic("jsonrpc: WithParams made invalid JSON: " + err.Error())
	}
	return n
}

// Line returns m as one line for newline-delimited framing (the stdio
// transport): a message that contains a raw newline or carriage return
// (pretty-printed JSON) is compacted first, so a reader never sees it
// split. The result ends with '\n'.
func Line(raw []byte) []byte {
	raw = bytes.TrimSpace(raw)
	if bytes.IndexByte(raw, '\n') >= 0 || bytes.IndexByte(raw, '\r') >= 0 {
		var b bytes.Buffer
		b.Grow(len(raw) + 1)
		if json.Compact(&b, raw) == nil {
			b.WriteByte('\n')
			return b.Bytes()
		}
	}
	out := make([]byte, 0, len(raw)+1)
	return append(append(out, raw...), '\n')
}
