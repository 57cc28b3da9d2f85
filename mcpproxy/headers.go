package mcpproxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// paramBinding ties a tool argument (a path into arguments) to the
// Mcp-Param-* header that mirrors it (SEP-2243, x-mcp-header).
type paramBinding struct {
	path   []string
	header string
}

// toolHeaders remembers each tool's x-mcp-header bindings, learned from
// tools/list results. The proxy needs them only when it terminates HTTP
// for a stdio upstream; an HTTP upstream validates its own headers.
type toolHeaders struct {
	mu      sync.Mutex
	byTool  map[string][]paramBinding
	fetched time.Time
}

// learn records the bindings of every tool in a tools/list result.
func (th *toolHeaders) learn(result []byte) (more string) {
	var r struct {
		Tools []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
		NextCursor string `json:"nextCursor"`
	}
	if json.Unmarshal(result, &r) != nil {
		return ""
	}
	th.mu.Lock()
	defer th.mu.Unlock()
	if th.byTool == nil {
		th.byTool = map[string][]paramBinding{}
	}
	for _, t := range r.Tools {
		th.byTool[t.Name] = bindings(t.InputSchema, nil)
	}
	return r.NextCursor
}

type schemaProp struct {
	XMCPHeader json.RawMessage       `json:"x-mcp-header"`
	Properties map[string]schemaProp `json:"properties"`
}

func bindings(schema json.RawMessage, prefix []string) []paramBinding {
	var s schemaProp
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	return collect(s.Properties, prefix, nil)
}

func collect(props map[string]schemaProp, prefix []string, out []paramBinding) []paramBinding {
	for name, p := range props {
		path := append(append([]string(nil), prefix...), name)
		var h string
		if json.Unmarshal(p.XMCPHeader, &h) == nil && h != "" {
			out = append(out, paramBinding{path: path, header: h})
		}
		out = collect(p.Properties, path, out)
	}
	return out
}

func (th *toolHeaders) lookup(tool string) ([]paramBinding, bool) {
	th.mu.Lock()
	defer th.mu.Unlock()
	b, ok := th.byTool[tool]
	return b, ok
}

// ensure lists the upstream's tools when tool is unknown, at most once a
// second, with the caller's _meta (a stateless request needs it).
func (th *toolHeaders) ensure(pe *peer, tool string, meta json.RawMessage) {
	if _, ok := th.lookup(tool); ok {
		return
	}
	th.mu.Lock()
	if time.Since(th.fetched) < time.Second {
		th.mu.Unlock()
		return
	}
	th.fetched = time.Now()
	th.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cursor := ""
	for page := 0; page < 20; page++ {
		params := map[string]any{"_meta": meta}
		if cursor != "" {
			params["cursor"] = cursor
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "tools/list", "params": params})
		req, err := jsonrpc.DecodeMessage(b)
		if err != nil {
			return
		}
		st := newStream(nil)
		w, err := pe.call(ctx, req, nil, st)
		if err != nil {
			return
		}
		select {
		case d := <-st.ch:
			st.close()
			if d.m.Result == nil {
				return
			}
			if cursor = th.learn(d.m.Result); cursor == "" {
				return
			}
		case <-ctx.Done():
			pe.cancel(w, "tools/list timed out")
			st.close()
			return
		}
	}
}

// check validates the Mcp-Param-* headers of a tools/call against its
// arguments.
func checkParamHeaders(h http.Header, bs []paramBinding, params []byte) error {
	if len(bs) == 0 {
		return nil
	}
	var p struct {
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	json.Unmarshal(params, &p)
	for _, b := range bs {
		name := "Mcp-Param-" + b.header
		hv, present := h.Get(name), len(h.Values(name)) > 0
		arg, ok := argument(p.Arguments, b.path)
		if !ok || string(arg) == "null" {
			if present {
				return fmt.Errorf("%s header for an absent argument", name)
			}
			continue
		}
		if !present {
			return fmt.Errorf("missing %s header", name)
		}
		v, err := decodeHeaderValue(hv)
		if err != nil {
			return fmt.Errorf("%s: %v", name, err)
		}
		if !sameValue(v, arg) {
			return fmt.Errorf("%s header does not match the argument", name)
		}
	}
	return nil
}

func argument(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
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

// decodeHeaderValue undoes SEP-2243's encoding: =?base64?...?= carries
// base64 (for values a header cannot hold), anything else is literal.
func decodeHeaderValue(v string) (string, error) {
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, nil
	}
	inner, ok = strings.CutSuffix(inner, "?=")
	if !ok {
		return v, nil
	}
	b, err := base64.StdEncoding.Strict().DecodeString(inner)
	if err != nil {
		return "", fmt.Errorf("invalid base64")
	}
	return string(b), nil
}

// sameValue compares a decoded header with a primitive JSON argument.
func sameValue(h string, arg json.RawMessage) bool {
	var v any
	if json.Unmarshal(arg, &v) != nil {
		return false
	}
	switch v := v.(type) {
	case string:
		return h == v
	case bool:
		return h == strconv.FormatBool(v)
	case float64:
		if !exactInteger(v) {
			return false
		}
		f, err := strconv.ParseFloat(h, 64)
		return err == nil && f == v
	}
	return false
}

func exactInteger(v float64) bool { return v == math.Trunc(v) && math.Abs(v) <= 1<<53-1 }

// setParamHeaders mirrors the arguments bound by x-mcp-header into
// Mcp-Param-* headers, as a stateless-era client must.
func setParamHeaders(h http.Header, bs []paramBinding, params []byte) {
	if len(bs) == 0 {
		return
	}
	var p struct {
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	json.Unmarshal(params, &p)
	for _, b := range bs {
		arg, ok := argument(p.Arguments, b.path)
		if !ok {
			continue
		}
		var v any
		if json.Unmarshal(arg, &v) != nil {
			continue
		}
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case bool:
			s = strconv.FormatBool(v)
		case float64:
			if !exactInteger(v) {
				continue // the header carries integers a float64 holds exactly
			}
			s = strconv.FormatInt(int64(v), 10)
		default:
			continue
		}
		if !plainHeaderValue(s) {
			s = "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?="
		}
		h.Set("Mcp-Param-"+b.header, s)
	}
}

// plainHeaderValue: visible ASCII and inner spaces travel as they are.
func plainHeaderValue(s string) bool {
	if s != strings.TrimSpace(s) || strings.HasPrefix(s, "=?base64?") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
