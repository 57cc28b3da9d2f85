package offload

import (
	"encoding/json"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// member is one top-level member of a JSON object: its key as written
// and its raw value.
type member struct {
	key  []byte // the key literal, quotes included
	name string
	val  []byte
}

// objectMembers is a JSON object taken apart one level deep, to replace
// some members and write the rest back byte for byte, in order.
type objectMembers []*member

// members splits obj (valid JSON) into its members; ok is false when it
// is not an object.
func members(obj []byte) (objectMembers, bool) {
	i := jsonrpc.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, false
	}
	var m objectMembers
	for i = jsonrpc.SkipSpace(obj, i+1); i < len(obj) && obj[i] != '}'; {
		kend := jsonrpc.SkipValue(obj, i)
		name, err := jsonrpc.Unquote(obj[i:kend])
		if err != nil {
			return nil, false
		}
		v := jsonrpc.SkipSpace(obj, jsonrpc.SkipSpace(obj, kend)+1)
		vend := jsonrpc.SkipValue(obj, v)
		m = append(m, &member{key: obj[i:kend], name: name, val: obj[v:vend]})
		i = jsonrpc.SkipSpace(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = jsonrpc.SkipSpace(obj, i+1)
		}
	}
	return m, true
}

// get returns the member named name (the last, as encoding/json reads
// duplicates), nil when absent.
func (m objectMembers) get(name string) *member {
	for i := len(m) - 1; i >= 0; i-- {
		if m[i].name == name {
			return m[i]
		}
	}
	return nil
}

// setOrAdd sets name's value, appending the member when absent.
func (m *objectMembers) setOrAdd(name string, val []byte) {
	if e := m.get(name); e != nil {
		e.val = val
		return
	}
	key, _ := json.Marshal(name)
	*m = append(*m, &member{key: key, name: name, val: val})
}

// remove drops every member named name.
func (m *objectMembers) remove(name string) {
	out := (*m)[:0]
	for _, e := range *m {
		if e.name != name {
			out = append(out, e)
		}
	}
	*m = out
}

// encode writes the object back.
func (m objectMembers) encode() []byte {
	n := 2
	for _, e := range m {
		n += len(e.key) + len(e.val) + 2
	}
	out := make([]byte, 0, n)
	out = append(out, '{')
	for i, e := range m {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e.key...)
		out = append(out, ':')
		out = append(out, e.val...)
	}
	return append(out, '}')
}
