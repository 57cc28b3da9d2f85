package ownmethods

import (
	"bytes"
	"encoding/json"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// The results the proxy writes or extends are edited as raw JSON: every
// member the upstream sent is kept, byte for byte.

// isObject reports whether b (valid JSON) is an object.
func isObject(b []byte) bool {
	i := jsonrpc.SkipSpace(b, 0)
	return i < len(b) && b[i] == '{'
}

// result builds a result the proxy answers itself, with the fields its
// revision requires of every result (2026-07-28: resultType) and, when
// cacheable (a read or a list), of cacheable ones (ttlMs, cacheScope:
// what the proxy returns is the caller's own, so private and not cached).
func result(rq Request, cacheable bool, fields map[string]any) []byte {
	if rq.stateless() {
		fields["resultType"] = "complete"
		if cacheable {
			fields["ttlMs"] = 0
			fields["cacheScope"] = "private"
		}
	}
	b, err := json.Marshal(fields)
	if err != nil {
		panic("ownmethods: a result did not encode: " + err.Error()) // fields are the proxy's own
	}
	return b
}

// addResourcesCapability declares the resources capability (for the
// proxy's artifact URIs), with stream: true when the face can stream, in
// an initialize or server/discover result (an object). ok is false when
// capabilities or capabilities.resources is there but not an object.
func addResourcesCapability(r []byte, stream bool) (out []byte, ok bool) {
	caps := jsonrpc.RawMember(r, "capabilities")
	res := jsonrpc.RawMember(caps, "resources")
	if (caps != nil && !isObject(caps)) || (res != nil && !isObject(res)) {
		return nil, false
	}
	switch {
	case stream:
		return jsonrpc.SetPath(r, []byte(`true`), "capabilities", "resources", "stream")
	case res == nil:
		return jsonrpc.SetPath(r, []byte(`{}`), "capabilities", "resources")
	}
	return r, true
}

// addToList appends items to the list under key in the first page of a
// list response. An upstream without the method answers -32601; the
// proxy then answers with its own items alone. private marks items that
// are the caller's own: a stateless-era result carrying them must not be
// cached across authorization contexts. ok is false when the result, or
// the list in it, is not what the method returns.
func addToList(resp *jsonrpc.Message, key string, items [][]byte, rq Request, private bool) (out *jsonrpc.Message, ok bool) {
	if resp.Error != nil {
		if resp.ErrorCode() != jsonrpc.CodeMethodNotFound {
			return resp, true
		}
		resp = jsonrpc.Response(resp.ID, result(rq, true, map[string]any{key: []any{}}))
	}
	r := resp.Result
	list := jsonrpc.RawMember(r, key)
	if !isObject(r) || (list != nil && list[0] != '[') {
		return nil, false
	}
	if len(items) == 0 {
		return resp, true
	}
	r, ok = jsonrpc.SetPath(r, appendArray(list, items), key)
	if ok && private && rq.stateless() {
		r, ok = jsonrpc.SetPath(r, []byte(`"private"`), "cacheScope")
	}
	if !ok {
		return nil, false
	}
	return resp.WithResult(r), true
}

// appendArray returns the JSON array list (nil: empty) with items
// appended.
func appendArray(list []byte, items [][]byte) []byte {
	var b bytes.Buffer
	if list == nil {
		b.WriteByte('[')
	} else {
		end := bytes.LastIndexByte(list, ']')
		b.Write(list[:end])
		if len(jsonrpc.Elements(list, [2]int{0, len(list)})) > 0 {
			b.WriteByte(',')
		}
	}
	b.Write(bytes.Join(items, []byte(",")))
	b.WriteByte(']')
	return b.Bytes()
}

// artifactTemplate describes Spillway's artifact URIs in
// resources/templates/list.
var artifactTemplate = []byte(`{"uriTemplate":"spillway://artifacts/{id}","name":"spillway-artifact",` +
	`"title":"Spillway artifact","description":"A large tool output stored by Spillway; read it, stream it, or fetch its httpUrl.",` +
	`"streamable":true}`)
