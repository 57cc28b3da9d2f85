package jsonrpc

import (
	"bytes"
	"encoding/json"
)

// Glimpse is what the two ends of a message too large to read show of its
// envelope: enough to answer the request it carries or to fail the request
// it answers, without ever holding the message whole.
type Glimpse struct {
	// ID is the top-level id, raw; nil when neither end shows it.
	ID []byte
	// Method reports a top-level "method" member: a request (with an ID)
	// or a notification.
	Method bool
	// Response reports a top-level "result" or "error" member.
	Response bool
}

// Peek reads the envelope from the first bytes (head) and the last bytes
// (tail) of a message, neither of which need be complete JSON. The id is
// looked for in both: SDKs differ in where they write it (the TypeScript
// SDK writes it after the result). Where both ends show one, the tail
// wins, as in Decode, where the last "id" member counts.
func Peek(head, tail []byte) Glimpse {
	var g Glimpse
	d := json.NewDecoder(bytes.NewReader(head))
	d.UseNumber()
	if t, err := d.Token(); err == nil && t == json.Delim('{') {
		for d.More() {
			k, err := d.Token()
			if err != nil {
				break
			}
			switch k {
			case "method":
				g.Method = true
			case "result", "error":
				g.Response = true
			}
			var v json.RawMessage
			if err := d.Decode(&v); err != nil {
				break
			}
			if k == "id" && g.ID == nil && isID(v) {
				g.ID = bytes.TrimSpace(v)
			}
		}
	}
	if id := tailID(tail); id != nil {
		g.ID = id
	}
	return g
}

// PeekID finds the top-level "id" of a message from the first bytes of
// it, which need not be complete JSON: when a message is too large to
// read, its id (if it came before the cut) still lets the proxy answer the
// request that waits for it with an error. ok is false when the prefix
// does not show a valid id.
func PeekID(prefix []byte) (id []byte, ok bool) {
	g := Peek(prefix, nil)
	return g.ID, g.ID != nil
}

func isID(v []byte) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && (v[0] == '"' || v[0] == '-' || (v[0] >= '0' && v[0] <= '9'))
}

// tailID reads `"id":<string or number>}` at the very end of a message.
// A message is one JSON object, so its last '}' closes it and the member
// just before that '}' is top-level. The scan goes backwards and gives up
// whenever the bytes before the cut would be needed to be sure (a run of
// backslashes reaching the start, a value cut in two).
func tailID(t []byte) []byte {
	i := skipSpaceBack(t, len(t))
	if i == 0 || t[i-1] != '}' {
		return nil
	}
	end := skipSpaceBack(t, i-1)
	start := -1
	switch {
	case end == 0:
		return nil
	case t[end-1] == '"':
		for j := end - 2; j >= 0; j-- {
			if t[j] != '"' {
				continue
			}
			if esc, known := escaped(t, j); !known {
				return nil
			} else if !esc {
				start = j
				break
			}
		}
	default:
		j := end
		for j > 0 && bytes.IndexByte([]byte("0123456789+-.eE"), t[j-1]) >= 0 {
			j--
		}
		start = j
	}
	if start <= 0 || start == end || !json.Valid(t[start:end]) || !isID(t[start:end]) {
		return nil
	}
	k := skipSpaceBack(t, start)
	if k == 0 || t[k-1] != ':' {
		return nil
	}
	k = skipSpaceBack(t, k-1)
	if k < 4 || string(t[k-4:k]) != `"id"` {
		return nil
	}
	if esc, known := escaped(t, k-4); esc || !known {
		return nil
	}
	return append([]byte(nil), t[start:end]...)
}

func skipSpaceBack(b []byte, i int) int {
	for i > 0 && (b[i-1] == ' ' || b[i-1] == '\t' || b[i-1] == '\n' || b[i-1] == '\r') {
		i--
	}
	return i
}

// escaped reports whether the quote at b[j] is escaped: preceded by an odd
// run of backslashes. known is false when the run reaches the start of b,
// where the bytes before the cut would decide.
func escaped(b []byte, j int) (esc, known bool) {
	n := 0
	for j-n-1 >= 0 && b[j-n-1] == '\\' {
		n++
	}
	return n%2 == 1, j-n-1 >= 0
}
