// Package offload replaces the large items of MCP results with a preview
// and a link: text over a threshold, image and audio data, embedded
// resources with a large text or blob. The bytes go to an
// artifact.Service (durable before the link is handed out) and the item
// becomes a text preview plus a resource_link carrying httpUrl and
// httpUrlExpiresAt.
//
// It works on raw JSON: a result is never decoded into Go values, the
// bytes outside the replaced items are copied unchanged, and an item's
// string literal is decoded on its way to the store, so a 50 MB text is
// never copied into memory a second time. A text or base64 data the
// transport spilled to disk (package spill) is decoded once, while it
// arrives (Rewriter.Tap): into its preview and a staged copy, so that
// storing it once its message is in is a copy.
package offload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/shrink"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/policy"
)

// Decider decides whether an item is offloaded; *policy.Engine is one.
type Decider interface {
	Offload(ctx context.Context, in policy.OffloadInput) (policy.OffloadDecision, error)
}

// Options tune a Rewriter. Zero values take the defaults.
type Options struct {
	// Budget bounds a tools/call result as the agent receives it: what
	// stays inline of content and structuredContent together, previews
	// and links included. A result over it has its largest items
	// offloaded (many small text items together, as one artifact) and a
	// large structuredContent shrunk to a preview valid for the tool's
	// outputSchema. Default 6 KiB.
	Budget int64
	// PreviewBudget is what the previews of one result share, in bytes of
	// text (each gets an equal part, at least 256). Default 2 KiB.
	PreviewBudget int
	// NoThumbnails leaves offloaded images without the small inline copy
	// (long side ThumbMax pixels, default 512) a model can look at.
	NoThumbnails bool
	ThumbMax     int
	// Items over these sizes (decoded bytes) are offloaded even within
	// the budget. Defaults: 16 KiB text, 4 KiB binary. A resources/read
	// result has no budget: its items are offloaded over these alone.
	TextThreshold, BinaryThreshold int64
	// TTL of the links handed out, unless the policy says otherwise.
	// Default 15 minutes.
	TTL time.Duration
	// FailClosed withholds a result whose large item could not be stored
	// (a tool error for tools/call, ErrWithheld for resources/read)
	// instead of returning the content inline. A result (a resources/read
	// item) over Budget is withheld so whatever FailClosed says: its size
	// must never put it inline, where a slow store would otherwise send
	// the largest outputs.
	FailClosed bool
	// Tools switches offloading off (false) for the named tools.
	Tools map[string]bool
	// Server names the upstream in policy inputs.
	Server string
	// StoreStall bounds the offloading of one result (decisions and
	// stores) by its progress, not its total time: it fails, as if the
	// store had failed, once fewer than StallBytes move to the store
	// within StoreStall. The client's own cancellation does not stop it:
	// see Rewrite. Default 30 seconds.
	StoreStall time.Duration
	// Spills resolves the strings the transport spilled to disk while a
	// result streamed in; nil when it spills none.
	Spills Spills
	// StageDir is where the strings tapped as they arrive (Tap) are
	// staged decoded, in files unlinked at once ("": os.TempDir()), when
	// the artifact store has no staging of its own (artifact.Stager: the
	// local-directory store stages in its own folder, and storing is
	// then a link); and where an image is kept while its thumbnail is
	// drawn (preview.Options.TempDir). StageMax is the most bytes staged at once (default
	// 4 GiB): past it a string is decoded from its spill file when it is
	// stored.
	StageDir string
	StageMax int64
	Logger   *slog.Logger
}

// Call says what a result answers: the policy sees it, and the stored
// artifacts are named after it and belong to its tenant.
type Call struct {
	Method string // "tools/call" or "resources/read"
	Tool   string // tools/call: the tool's name
	URI    string // resources/read: the resource read
	Tenant string // the caller ("" when inbound auth is off)
	// Schema is the tool's outputSchema as its client was shown it (see
	// Learned); nil when the tool has none.
	Schema *shrink.Schema
	// SchemaErr is set when the proxy cannot use the tool's outputSchema:
	// it does not know it (ErrUnknown), or it does not compile. No shrunk
	// value could be checked, so a large structuredContent makes the
	// result a tool error.
	SchemaErr error
}

// Rewriter replaces large items of tools/call and resources/read results
// with a preview and a link. Create it with New; it is safe for
// concurrent use.
type Rewriter struct {
	svc *artifact.Service
	dec Decider
	o   Options
	lit lits
	log *slog.Logger
	// budget is Options.Budget and Options.PreviewBudget, with the
	// splits of the result's room named.
	budget Budget
	// early counts the strings worked on as they arrive (Tap), stage
	// holds their decoded copies.
	early chan struct{}
	stage *stager
}

// New returns a Rewriter storing into svc and asking dec about every item
// over the thresholds.
func New(svc *artifact.Service, dec Decider, o Options) *Rewriter {
	if o.TextThreshold <= 0 {
		o.TextThreshold = 16 << 10
	}
	if o.BinaryThreshold <= 0 {
		o.BinaryThreshold = 4 << 10
	}
	if o.Budget <= 0 {
		o.Budget = 6 << 10
	}
	if o.PreviewBudget <= 0 {
		o.PreviewBudget = 2 << 10
	}
	if o.TTL <= 0 {
		o.TTL = 15 * time.Minute
	}
	if o.StoreStall <= 0 {
		o.StoreStall = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.StageDir == "" {
		o.StageDir = os.TempDir()
	}
	if o.StageMax <= 0 {
		o.StageMax = 4 << 30
	}
	return &Rewriter{svc: svc, dec: dec, o: o, lit: lits{o.Spills}, log: o.Logger, early: make(chan struct{}, maxEarly),
		stage: &stager{svc: svc, dir: o.StageDir, max: o.StageMax}, budget: Budget{Result: o.Budget, Previews: o.PreviewBudget}}
}

// ErrWithheld is returned by Rewrite for a resources/read result that
// FailClosed withholds: an item was too large to return inline and could
// not be stored. (A tools/call result is withheld as a tool error.)
var ErrWithheld = errors.New("offload: the result was too large to return inline and could not be stored")

// Rewrite returns result with every large item offloaded, and the
// artifacts it stored. When nothing is offloaded it returns result itself.
// Bytes outside the replaced items are copied unchanged, and the result
// keeps its method's shape: tools/call items become a text preview and a
// resource_link; a resources/read item stays a resource-contents item
// (see resourceItem). An error means result is not valid JSON, or
// ErrWithheld; the artifacts stored before it are returned all the same.
//
// ctx's values pass to the policy and the store, its cancellation does
// not: a client that leaves while its result is stored would otherwise
// get the result inline on its next delivery (another stream of its
// session, a replay after Last-Event-ID) and leave a store cut half way.
// Options.StoreStall bounds the work instead, by its progress: a large
// result on a slow store is stored however long it takes while it moves.
// A thumbnail, which only the client waits for, is drawn only while ctx
// lasts.
func (f *Rewriter) Rewrite(ctx context.Context, c Call, result []byte) ([]byte, []artifact.Artifact, error) {
	if c.Method == "tools/call" && f.o.Tools != nil {
		if on, ok := f.o.Tools[c.Tool]; ok && !on {
			return result, nil, nil
		}
	}
	if !jsonrpc.Valid(result) { // encoding/json's answer, at a third of its cost
		return nil, nil, fmt.Errorf("offload: result is not valid JSON")
	}
	if n := f.lit.rawLen(result); !f.budget.over(n) && n <= min(f.o.TextThreshold, f.o.BinaryThreshold) {
		return result, nil, nil // nothing in it can be over a threshold or the budget
	}
	// Only a result that may be stored gets the store's watch. The
	// call's own cancellation goes on as a value, for what only its
	// client waits for (previewWhileCalled).
	ctx, stop := watchStall(withCall(ctx), f.o.StoreStall)
	defer stop()
	if c.Method != "resources/read" {
		return f.rewriteResult(ctx, c, result)
	}
	return f.rewriteContents(ctx, c, result)
}

// rewriteContents is Rewrite for a resources/read result: each item of
// contents is offloaded on its own (item), over its kind's threshold, as
// such a result has no budget.
func (f *Rewriter) rewriteContents(ctx context.Context, c Call, result []byte) ([]byte, []artifact.Artifact, error) {
	arr, ok := jsonrpc.Member(result, "contents")
	if !ok || result[arr[0]] != '[' {
		return result, nil, nil
	}
	var out []byte
	var stored []artifact.Artifact
	last := 0
	for _, it := range jsonrpc.Elements(result, arr) {
		repl, a, err := f.item(ctx, c, result[it[0]:it[1]])
		if err != nil {
			if f.o.FailClosed || f.budget.over(f.lit.rawLen(result[it[0]:it[1]])) {
				f.log.Error("offload failed; withholding the result", "method", c.Method, "uri", c.URI, "err", err)
				return nil, stored, ErrWithheld
			}
			f.log.Warn("offload failed; the item stays inline", "method", c.Method, "uri", c.URI, "err", err)
			continue
		}
		if repl == nil {
			continue
		}
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

// withheld is the tools/call result that replaces one of size bytes
// (as the client would have received it) that could not be stored.
func withheld(size int64) []byte {
	text := "The tool's result (" + humanSize(size) + ") is too large to return inline and could not be stored for download; try again later."
	b, _ := json.Marshal(text)
	return []byte(`{"content":[{"type":"text","text":` + string(b) + `}],"isError":true}`)
}

// item offloads one resources/read item, or returns nil to keep it.
func (f *Rewriter) item(ctx context.Context, c Call, it []byte) ([]byte, artifact.Artifact, error) {
	if len(it) == 0 || it[0] != '{' {
		return nil, artifact.Artifact{}, nil
	}
	lit, binary := pick(it)
	if len(lit) < 2 || lit[0] != '"' {
		return nil, artifact.Artifact{}, nil
	}
	u := unit{kind: "resource", mime: jsonrpc.StringMember(it, "mimeType")}
	u.threshold = f.threshold(binary && !IsText(u.mime))
	u.size = f.lit.len(lit)
	if binary {
		u.size = base64Size(u.size, lit)
		u.open = func() io.Reader { return f.lit.binary(lit) }
	} else {
		u.open = func() io.Reader { return f.lit.open(lit) }
		u.early = f.lit.early(lit)
	}
	if u.size <= u.threshold {
		return nil, artifact.Artifact{}, nil
	}
	if !binary {
		if _, spilled := f.lit.spilled(lit); !spilled {
			u.size, _ = io.Copy(io.Discard, newStringReader(lit)) // exact, without a copy
		}
		if u.size <= u.threshold {
			return nil, artifact.Artifact{}, nil
		}
		if u.mime == "" {
			u.mime = sniffText(f.lit.open(lit))
		}
	}
	w := &resultWriter{f: f, c: c, previewBudget: f.budget.Previews}
	pub, err := w.publish(ctx, u, "")
	if err != nil || pub == nil {
		return nil, artifact.Artifact{}, err
	}
	return resourceItem(it, pub.text, pub.resourceLink()), pub.a, nil
}

// MetaOffloaded is the _meta key under which an offloaded resources/read
// item carries its link: the same resource_link object a tools/call
// result gets (uri, httpUrl, httpUrlExpiresAt, size, mimeType, sha256).
const MetaOffloaded = "dev.spillway/offloaded"

// resourceItem is what an offloaded resources/read item becomes. The
// schema allows only resource-contents items in contents (uri, mimeType,
// text or blob, _meta), so the item stays one: a TextResourceContents for
// the same uri whose text is the preview (mimeType text/plain, as that is
// what the text is), with the link in _meta under MetaOffloaded. The
// item's other _meta members are kept.
func resourceItem(orig []byte, preview string, link artifact.ResourceLink) []byte {
	uri := jsonrpc.RawMember(orig, "uri")
	if len(uri) == 0 || uri[0] != '"' {
		uri, _ = json.Marshal(link.URI) // not a valid item; name the artifact
	}
	meta := jsonrpc.RawMember(orig, "_meta")
	if len(meta) == 0 || meta[0] != '{' {
		meta = []byte(`{}`)
	}
	lb, _ := json.Marshal(link)
	meta, _ = jsonrpc.SetPath(meta, lb, MetaOffloaded)
	text, _ := json.Marshal(preview)
	out := make([]byte, 0, len(uri)+len(text)+len(meta)+64)
	out = append(out, `{"uri":`...)
	out = append(out, uri...)
	out = append(out, `,"mimeType":"text/plain","text":`...)
	out = append(out, text...)
	out = append(out, `,"_meta":`...)
	out = append(out, meta...)
	return append(out, '}')
}

// pick returns the text or blob literal of a resource contents object.
func pick(obj []byte) ([]byte, bool) {
	if b := jsonrpc.RawMember(obj, "blob"); b != nil {
		return b, true
	}
	return jsonrpc.RawMember(obj, "text"), false
}

// base64Size is the decoded size of a base64 literal of n bytes without
// escapes (the padding read from lit when it is held in memory).
func base64Size(n int64, lit []byte) int64 {
	pad := int64(0)
	for i := len(lit) - 2; i > 0 && lit[i] == '=' && pad < 2; i-- {
		pad++
	}
	return max(n/4*3-pad, 0)
}
