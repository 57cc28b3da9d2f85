package sessionbridge

import (
	"slices"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// withoutMembers returns the JSON object obj without its top-level members
// named keys; obj itself (not copied) when it has none of them or is no
// object. obj must be valid JSON (every decoded message is).
func withoutMembers(obj []byte, keys ...string) []byte {
	i := jsonrpc.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return obj
	}
	var kept [][2]int // spans of the members kept, key to value end
	dropped := false
	for i = jsonrpc.SkipSpace(obj, i+1); i < len(obj) && obj[i] != '}'; {
		start := i
		kend := jsonrpc.SkipValue(obj, i)
		k, err := jsonrpc.Unquote(obj[i:kend])
		if err != nil {
			return obj
		}
		i = jsonrpc.SkipSpace(obj, jsonrpc.SkipSpace(obj, kend)+1)
		vend := jsonrpc.SkipValue(obj, i)
		if slices.Contains(keys, k) {
			dropped = true
		} else {
			kept = append(kept, [2]int{start, vend})
		}
		i = jsonrpc.SkipSpace(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = jsonrpc.SkipSpace(obj, i+1)
		}
	}
	if !dropped {
		return obj
	}
	out := make([]byte, 0, len(obj))
	out = append(out, '{')
	for n, s := range kept {
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, obj[s[0]:s[1]]...)
	}
	return append(out, '}')
}
