package mcpheader

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
)

// Binding ties a tool argument, by its path of property names in the
// arguments object, to the Mcp-Param-{Header} header that mirrors it.
type Binding struct {
	Path   []string
	Header string
}

// arguments returns a tools/call's arguments by name.
func arguments(params []byte) map[string]json.RawMessage {
	var p struct {
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	json.Unmarshal(params, &p)
	return p.Arguments
}

// argument follows path into args.
func argument(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	if len(path) == 0 {
		return nil, false
	}
	v, ok := args[path[0]]
	for _, k := range path[1:] {
		if !ok {
			return nil, false
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(v, &obj) != nil {
			return nil, false
		}
		v, ok = obj[k]
	}
	return v, ok
}

// headerValue is the string form of a primitive argument (string, boolean,
// or an integer a float64 holds exactly); ok is false for anything else,
// which no header carries.
func headerValue(arg json.RawMessage) (s string, ok bool) {
	var v any
	if json.Unmarshal(arg, &v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case float64:
		if exactInteger(v) {
			return strconv.FormatInt(int64(v), 10), true
		}
	}
	return "", false
}

// exactInteger: the integers the spec allows (JavaScript's safe range).
func exactInteger(v float64) bool { return v == math.Trunc(v) && math.Abs(v) <= 1<<53-1 }

// setParams mirrors the arguments bs bind into Mcp-Param-* headers. An
// absent or null argument, or one no header can carry, gets none.
func setParams(h http.Header, bs []Binding, params []byte) {
	if len(bs) == 0 {
		return
	}
	args := arguments(params)
	for _, b := range bs {
		if arg, ok := argument(args, b.Path); ok {
			if s, ok := headerValue(arg); ok {
				h.Set(ParamPrefix+b.Header, Encode(s))
			}
		}
	}
}

// CheckParams validates the Mcp-Param-* headers of a tools/call (params is
// its params) against the tool's bindings bs: a bound argument that is
// present and not null needs its header, decoded equal to it (integers
// compared as numbers); an absent or null one must have none. It returns
// an *Error, or nil. Headers no binding names are not looked at.
func CheckParams(h http.Header, bs []Binding, params []byte) error {
	if len(bs) == 0 {
		return nil
	}
	args := arguments(params)
	for _, b := range bs {
		name := ParamPrefix + b.Header
		present := len(h.Values(name)) > 0
		arg, ok := argument(args, b.Path)
		if !ok || string(arg) == "null" {
			if present {
				return mismatch("%s header for an absent argument", name)
			}
			continue
		}
		if !present {
			return mismatch("missing %s header", name)
		}
		v, err := Decode(h.Get(name))
		if err != nil {
			return mismatch("%s: %v", name, err)
		}
		if !sameValue(v, arg) {
			return mismatch("%s header does not match the argument", name)
		}
	}
	return nil
}

// sameValue compares a decoded header with a primitive JSON argument;
// integers as numbers ("42.0" is 42).
func sameValue(h string, arg json.RawMessage) bool {
	s, ok := headerValue(arg)
	if !ok {
		return false
	}
	if a := bytes.TrimSpace(arg); a[0] == '-' || (a[0] >= '0' && a[0] <= '9') {
		f, err := strconv.ParseFloat(h, 64)
		want, _ := strconv.ParseFloat(s, 64)
		return err == nil && f == want
	}
	return h == s
}
