package mcpproxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"github.com/spillway-dev/spillway/mcpproxy/internal/jsonrpc"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/policy"
)

// Decider decides whether an item is offloaded; *policy.Engine is one.
type Decider interface {
	Offload(ctx context.Context, in policy.OffloadInput) (policy.OffloadDecision, error)
}

// OffloadOptions tune an Offloader. Zero values take the defaults.
type OffloadOptions struct {
	// Items at or below these sizes (decoded bytes) are never offloaded,
	// nor shown to the policy. Defaults: 16 KiB text, 4 KiB binary.
	TextThreshold, BinaryThreshold int64
	// TTL of the links handed out, unless the policy says otherwise.
	// Default 15 minutes.
	TTL time.Duration
	// FailClosed turns a store failure into a tool error instead of
	// returning the content inline.
	FailClosed bool
	// Tools switches offloading off (false) for the named tools.
	Tools map[string]bool
	// Server names the upstream in policy inputs.
	Server string
	Logger *slog.Logger
}

// Offloader replaces large items of tools/call and resources/read results
// with a preview and a resource_link. Safe for concurrent use.
type Offloader struct {
	svc *artifact.Service
	dec Decider
	o   OffloadOptions
	log *slog.Logger
}

// NewOffloader returns an offloader storing into svc and asking dec.
func NewOffloader(svc *artifact.Service, dec Decider, o OffloadOptions) *Offloader {
	if o.TextThreshold <= 0 {
		o.TextThreshold = 16 << 10
	}
	if o.BinaryThreshold <= 0 {
		o.BinaryThreshold = 4 << 10
	}
	if o.TTL <= 0 {
		o.TTL = 15 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Offloader{svc: svc, dec: dec, o: o, log: o.Logger}
}

// errStore marks a failure to store an item that FailClosed turns into a
// tool error.
type errStore struct{ err error }

func (e *errStore) Error() string { return "storing the item failed: " + e.err.Error() }

// Rewrite returns result with every large item offloaded, and the
// artifacts it stored. When nothing is offloaded it returns result itself.
// Bytes outside the replaced items are copied unchanged.
func (f *Offloader) Rewrite(ctx context.Context, c Call, result []byte) ([]byte, []artifact.Artifact, error) {
	if c.Method == "tools/call" && f.o.Tools != nil {
		if on, ok := f.o.Tools[c.Tool]; ok && !on {
			return result, nil, nil
		}
	}
	key := "content"
	if c.Method == "resources/read" {
		key = "contents"
	}
	if !json.Valid(result) {
		return nil, nil, fmt.Errorf("result is not valid JSON")
	}
	arr, ok := member(result, key)
	if !ok || result[arr[0]] != '[' {
		return result, nil, nil
	}
	var out []byte
	var stored []artifact.Artifact
	last, n := 0, 0
	for _, it := range elements(result, arr) {
		repl, a, err := f.item(ctx, c, result[it[0]:it[1]], n+1)
		if err != nil {
			if f.o.FailClosed {
				f.log.Error("offload failed; answering with a tool error", "tool", c.Tool, "err", err)
				return failClosed(c), stored, nil
			}
			f.log.Warn("offload failed; the item stays inline", "tool", c.Tool, "err", err)
			continue
		}
		if repl == nil {
			continue
		}
		n++
		stored = append(stored, a)
		out = append(out, result[last:it[0]]...)
		out = append(out, repl...)
		last = it[1]
	}
	if out == nil {
		return result, nil, nil
	}
	return append(out, result[last:]...), stored, nil
}

func failClosed(c Call) []byte {
	b, _ := json.Marshal(map[string]any{
		"content": []any{map[string]string{"type": "text",
			"text": "The result was too large to return inline and could not be stored for download; try again later."}},
		"isError": true,
	})
	return b
}

// item offloads one content item, or returns nil to keep it.
func (f *Offloader) item(ctx context.Context, c Call, it []byte, n int) ([]byte, artifact.Artifact, error) {
	if len(it) == 0 || it[0] != '{' {
		return nil, artifact.Artifact{}, nil
	}
	typ := stringMember(it, "type")
	mime := stringMember(it, "mimeType")
	var lit []byte
	var binary bool
	kind := typ
	switch {
	case c.Method == "resources/read":
		kind = "resource"
		lit, binary = pick(it)
	case typ == "text":
		lit = rawMember(it, "text")
	case typ == "image" || typ == "audio":
		lit, binary = rawMember(it, "data"), true
	case typ == "resource":
		if r, ok := member(it, "resource"); ok && it[r[0]] == '{' {
			res := it[r[0]:r[1]]
			mime = stringMember(res, "mimeType")
			lit, binary = pick(res)
		}
	}
	if len(lit) < 2 || lit[0] != '"' {
		return nil, artifact.Artifact{}, nil
	}
	size, threshold := int64(len(lit)-2), f.o.TextThreshold
	if binary {
		size, threshold = base64Size(lit), f.o.BinaryThreshold
	}
	if size <= threshold {
		return nil, artifact.Artifact{}, nil
	}
	if !binary {
		size, _ = io.Copy(io.Discard, newStringReader(lit)) // exact, without a copy
		if size <= threshold {
			return nil, artifact.Artifact{}, nil
		}
		if mime == "" {
			mime = sniffText(lit)
		}
	}
	d, err := f.dec.Offload(ctx, policy.OffloadInput{
		Server: f.o.Server, Tool: c.Tool, Method: c.Method, Kind: kind,
		MimeType: mime, Size: size, Tenant: c.Tenant, Threshold: threshold,
	})
	if err != nil || !d.Offload {
		if err != nil {
			f.log.Warn("offload decision failed; keeping the item inline", "err", err)
		}
		return nil, artifact.Artifact{}, nil
	}
	ttl := f.o.TTL
	if d.TTLSeconds > 0 {
		ttl = time.Duration(d.TTLSeconds) * time.Second
	}
	var src io.Reader = newStringReader(lit)
	if binary {
		src = base64.NewDecoder(base64.StdEncoding, src)
	}
	if mime == "" {
		mime = "application/octet-stream"
	}
	pv := &previewer{}
	name := c.Tool
	if name == "" {
		name = "resource"
	}
	a, l, err := f.svc.Publish(ctx, artifact.Artifact{
		Name:     fmt.Sprintf("%s-%d%s", name, n, extension(mime)),
		MimeType: mime,
		Tenant:   c.Tenant,
		Source:   "tool:" + c.Tool,
	}, io.TeeReader(src, pv), artifact.LinkOptions{TTL: ttl, Tenant: c.Tenant, Audience: d.Audience, Source: "offload"})
	if err != nil {
		return nil, artifact.Artifact{}, &errStore{err}
	}
	preview := pv.text(kind, itemMeta{mime: mime, sha256: a.SHA256, uri: artifact.URI(a.ID)},
		linkMeta{url: l.URL, expires: l.Expires})
	text, _ := json.Marshal(map[string]string{"type": "text", "text": preview})
	link, _ := json.Marshal(artifact.NewResourceLink(a, l))
	return bytes.Join([][]byte{text, link}, []byte(",")), a, nil
}

// pick returns the text or blob literal of a resource contents object.
func pick(obj []byte) ([]byte, bool) {
	if b := rawMember(obj, "blob"); b != nil {
		return b, true
	}
	return rawMember(obj, "text"), false
}

// base64Size is the decoded size of a base64 literal without escapes.
func base64Size(lit []byte) int64 {
	s := lit[1 : len(lit)-1]
	pad := 0
	for i := len(s) - 1; i >= 0 && s[i] == '='; i-- {
		pad++
	}
	return int64(len(s)/4*3 - pad)
}

// sniffText guesses a text item's mime type from its first bytes.
func sniffText(lit []byte) string {
	head := make([]byte, 2048)
	n, _ := io.ReadFull(newStringReader(lit), head)
	head = bytes.TrimLeft(head[:n], " \t\r\n")
	switch {
	case len(head) > 0 && (head[0] == '[' || head[0] == '{'):
		return "application/json"
	case isDelimited("", head):
		return "text/csv"
	}
	return "text/plain; charset=utf-8"
}

func extension(mime string) string {
	mime, _, _ = strings.Cut(mime, ";")
	switch mime {
	case "application/json":
		return ".json"
	case "text/csv":
		return ".csv"
	case "text/tab-separated-values":
		return ".tsv"
	case "text/plain":
		return ".txt"
	case "text/markdown":
		return ".md"
	case "text/html":
		return ".html"
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	case "audio/wav", "audio/x-wav":
		return ".wav"
	case "audio/mpeg":
		return ".mp3"
	case "application/pdf":
		return ".pdf"
	}
	return ".bin"
}

// member finds key among the top-level members of the JSON object obj
// and returns the span of its value.
func member(obj []byte, key string) ([2]int, bool) {
	i := jsonrpc.SkipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return [2]int{}, false
	}
	var found [2]int
	ok := false
	for i = jsonrpc.SkipSpace(obj, i+1); i < len(obj) && obj[i] != '}'; {
		kend := jsonrpc.SkipValue(obj, i)
		k, err := jsonrpc.Unquote(obj[i:kend])
		if err != nil {
			return [2]int{}, false
		}
		i = jsonrpc.SkipSpace(obj, jsonrpc.SkipSpace(obj, kend)+1)
		vend := jsonrpc.SkipValue(obj, i)
		if k == key {
			found, ok = [2]int{i, vend}, true // the last duplicate wins, as in encoding/json
		}
		i = jsonrpc.SkipSpace(obj, vend)
		if i < len(obj) && obj[i] == ',' {
			i = jsonrpc.SkipSpace(obj, i+1)
		}
	}
	return found, ok
}

func rawMember(obj []byte, key string) []byte {
	if s, ok := member(obj, key); ok {
		return obj[s[0]:s[1]]
	}
	return nil
}

func stringMember(obj []byte, key string) string {
	v := rawMember(obj, key)
	if v == nil {
		return ""
	}
	s, _ := jsonrpc.Unquote(v)
	return s
}

// elements returns the spans of the elements of the array at span.
func elements(b []byte, span [2]int) [][2]int {
	var out [][2]int
	i := jsonrpc.SkipSpace(b, span[0]+1)
	for i < span[1] && b[i] != ']' {
		end := jsonrpc.SkipValue(b, i)
		out = append(out, [2]int{i, end})
		i = jsonrpc.SkipSpace(b, end)
		if b[i] == ',' {
			i = jsonrpc.SkipSpace(b, i+1)
		}
	}
	return out
}
