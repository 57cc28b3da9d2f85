package binary

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/ownmethods"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/binframe"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// Artifacts opens the proxy's artifacts as a caller may read them
// (*ownmethods.Methods is one).
type Artifacts interface {
	OpenArtifact(ctx context.Context, rq ownmethods.Request, reqID []byte, uri string) (artifact.Artifact, io.ReadCloser, *jsonrpc.Message, bool)
}

var _ Artifacts = (*ownmethods.Methods)(nil)

// item is one binary item's bytes, to follow its message.
type item struct {
	id   binframe.StreamID
	mime string
	size int64
	// open returns the bytes from the start, once.
	open func() io.Reader
	// done gives back what holds the bytes (a spilled string, an open
	// artifact); called once, sent or not.
	done func()
}

// release calls done on every item.
func release(items []item) {
	for _, it := range items {
		if it.done != nil {
			it.done()
		}
	}
}

// converter turns the binary items of one client's messages into binary
// mode. Its methods run on one goroutine at a time.
type converter struct {
	rq   ownmethods.Request
	arts Artifacts // nil: the proxy serves no artifacts
	max  int64     // the largest item sent as binary
	refs *refs
}

// message returns m with its result's binary items in binary mode, and
// the items whose bytes must follow it, in order; m itself and no items
// when nothing is binary (or m is no result).
func (c *converter) message(ctx context.Context, m *jsonrpc.Message) (*jsonrpc.Message, []item) {
	if m.Result == nil || m.Result[0] != '{' {
		return m, nil
	}
	r := m.Result
	var items []item
	for _, key := range []string{"content", "contents"} {
		arr := jsonrpc.RawMember(r, key)
		if len(arr) == 0 || arr[0] != '[' {
			continue
		}
		out, its := c.list(ctx, arr, key == "contents")
		if its == nil {
			continue
		}
		nr, ok := jsonrpc.SetPath(r, out, key)
		if !ok {
			release(its)
			continue
		}
		r, items = nr, append(items, its...)
	}
	if items == nil {
		return m, nil
	}
	return m.WithResult(r), items
}

// list converts a content array (tools/call, prompts/get) or, with
// contents, a resources/read contents array.
func (c *converter) list(ctx context.Context, arr []byte, contents bool) ([]byte, []item) {
	var elems [][]byte
	var items []item
	for _, sp := range jsonrpc.Elements(arr, [2]int{0, len(arr)}) {
		e := arr[sp[0]:sp[1]]
		var it *item
		switch typ := jsonrpc.StringMember(e, "type"); {
		case contents:
			e, it = c.inline(e, "blob")
		case typ == "image" || typ == "audio":
			e, it = c.inline(e, "data")
		case typ == "resource":
			e, it = c.embedded(e)
		case typ == "resource_link":
			elems = append(elems, e)
			e, it = c.original(ctx, e)
			if it == nil {
				continue
			}
		}
		elems = append(elems, e)
		if it != nil {
			items = append(items, *it)
		}
	}
	if items == nil {
		return arr, nil
	}
	return append(append([]byte{'['}, bytes.Join(elems, []byte{','})...), ']'), items
}

// embedded converts an embedded resource's blob.
func (c *converter) embedded(e []byte) ([]byte, *item) {
	res := jsonrpc.RawMember(e, "resource")
	nr, it := c.inline(res, "blob")
	if it == nil {
		return e, nil
	}
	ne, ok := jsonrpc.SetPath(e, nr, "resource")
	if !ok {
		release([]item{*it})
		return e, nil
	}
	return ne, it
}

// inline converts obj's base64 member (data, blob) to a binaryRef; obj
// unchanged and no item when it holds none, or one that is not valid
// base64, or one over the limit.
func (c *converter) inline(obj []byte, member string) ([]byte, *item) {
	lit := jsonrpc.RawMember(obj, member)
	if len(lit) == 0 || lit[0] != '"' {
		return obj, nil
	}
	it, sum, ok := c.source(lit)
	if !ok {
		return obj, nil
	}
	it.mime = jsonrpc.StringMember(obj, "mimeType")
	out, ok := withRef(obj, member, refJSON(it.id, it.size, sum), nil)
	if !ok {
		release([]item{it})
		return obj, nil
	}
	return out, &it
}

// source reads a base64 string literal (a spill marker, or the string
// itself) as an item: its size and SHA-256 (by a first pass over a
// spilled string's file), and how to read it again.
func (c *converter) source(lit []byte) (item, string, bool) {
	id := binframe.NewStreamID()
	if spill.IsMarker(lit) {
		x, ok := spill.Lookup(lit)
		if !ok || x.Kind() != "string" {
			return item{}, "", false
		}
		h := sha256.New()
		n, err := io.CopyBuffer(h, x.Base64(), make([]byte, 32<<10))
		if err != nil || n > c.max {
			return item{}, "", false
		}
		return item{id: id, size: n, open: x.Base64, done: x.Release}, hex.EncodeToString(h.Sum(nil)), true
	}
	s, err := jsonrpc.Unquote(lit)
	if err != nil {
		return item{}, "", false
	}
	data, ok := decodeBase64(s)
	if !ok || int64(len(data)) > c.max {
		return item{}, "", false
	}
	sum := sha256.Sum256(data)
	return item{id: id, size: int64(len(data)), open: func() io.Reader { return bytes.NewReader(data) }}, hex.EncodeToString(sum[:]), true
}

// decodeBase64 decodes standard base64, padded or not, line breaks
// ignored: what spill.String.Base64 accepts.
func decodeBase64(s string) ([]byte, bool) {
	s = strings.TrimRight(strings.NewReplacer("\r", "", "\n", "").Replace(s), "=")
	b, err := base64.RawStdEncoding.DecodeString(s)
	return b, err == nil
}

// original is the binary item of the original a resource_link the
// offloader made stands for (an image, audio, or an embedded resource),
// read from the store as the caller may read it; nil when the link is no
// such thing, or the artifact cannot be read, or is over the limit. The
// item carries the link's _meta (its httpUrl, under artifact.MetaLink),
// so a client that lost the bytes fetches them there.
func (c *converter) original(ctx context.Context, link []byte) ([]byte, *item) {
	meta := jsonrpc.RawMember(link, "_meta")
	lm := jsonrpc.RawMember(meta, artifact.MetaLink)
	typ := jsonrpc.StringMember(lm, "originalType")
	if c.arts == nil || (typ != "image" && typ != "audio" && typ != "resource") {
		return link, nil
	}
	uri := jsonrpc.StringMember(link, "uri")
	a, rc, fail, ours := c.arts.OpenArtifact(ctx, c.rq, nil, uri)
	if !ours || fail != nil {
		return link, nil
	}
	if a.Size > c.max {
		rc.Close()
		return link, nil
	}
	it := item{id: binframe.NewStreamID(), mime: a.MimeType, size: a.Size, open: func() io.Reader { return rc }, done: func() { rc.Close() }}
	c.refs.add(c.rq.Tenant, it.id, uri, a.Expires)
	ref := refJSON(it.id, a.Size, a.SHA256)
	var out []byte
	if typ == "resource" {
		ruri := jsonrpc.StringMember(lm, "originalUri")
		if ruri == "" {
			ruri = uri
		}
		res, _ := withRef(mustJSON(map[string]string{"uri": ruri, "mimeType": a.MimeType}), "blob", ref, nil)
		out, _ = withRef(mustJSON(map[string]any{"type": "resource", "resource": json.RawMessage(res)}), "", nil, meta)
	} else {
		out, _ = withRef(mustJSON(map[string]string{"type": typ, "mimeType": a.MimeType}), "data", ref, meta)
	}
	return out, &it
}

// refJSON is a binaryRef.
func refJSON(id binframe.StreamID, size int64, sum string) []byte {
	return mustJSON(map[string]any{"streamId": id.String(), "size": size, "checksum": sum})
}

// withRef returns obj without member, with transferMode "binary" and
// binaryRef ref (when ref is set), and _meta meta (when set); ok is false
// when obj is not an object.
func withRef(obj []byte, member string, ref, meta []byte) ([]byte, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil || m == nil {
		return nil, false
	}
	delete(m, member)
	if ref != nil {
		m["transferMode"] = json.RawMessage(`"binary"`)
		m["binaryRef"] = ref
	}
	if meta != nil {
		m["_meta"] = meta
	}
	return mustJSON(m), true
}

// mustJSON encodes v (the package's own values) without HTML escapes.
func mustJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("binary: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}
