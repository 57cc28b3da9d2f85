// Package offload replaces the large items of MCP results with a preview
// and a link: text over a threshold, image and audio data, embedded
// resources with a large text or blob. The bytes go to an
// artifact.Service (durable before the link is handed out) and the item
// becomes a text preview plus a resource_link carrying httpUrl and
// httpUrlExpiresAt.
//
// Rewrite (rewrite.go) handles a result in three stages, each in a file
// of its own, in this order:
//
//   - plan (plan.go) decides what leaves the result. A tools/call
//     result has one Budget for content and structuredContent
//     together: the items over their kind's threshold leave; then, while
//     the result is over its budget, the largest items, the small text
//     items together as one artifact, and whatever else is worth a link;
//     and a large structuredContent is to be shrunk. A resources/read item
//     leaves when it is over its kind's threshold.
//   - publish (publish.go) asks the policy (Decider) about each part
//     that leaves, stores it, builds its preview and mints its link. It
//     shrinks a large structuredContent to a value valid for the tool's
//     outputSchema (package shrink), storing the members it cuts.
//   - assemble (assemble.go) writes the result back, with a preview and
//     a resource_link in place of each part that left, and lists them in
//     _meta (MetaReplaced).
//
// A spilled string's work may start before all that, while it is still
// arriving (Rewriter.Tap, tap.go). After Rewrite, Spent frees the
// spilled strings the rewritten result no longer holds. The other files
// are helpers: spilled.go and jsonstr.go read the result's string
// literals, spilled or not; members.go takes a JSON object apart and
// writes it back; mime.go tells a text's type; deadline.go is the stall
// watch on storing; aside.go builds a preview beside a store's write;
// schemas.go keeps the outputSchemas the tools were shown with
// (Learned).
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
	"log/slog"
	"os"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/shrink"
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
	// outputSchema. Default 6 KiB. Budget (the type) says how it is
	// shared out.
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
	// Metrics counts each item stored (metrics.go); nil counts nothing.
	Metrics Metrics
}

// Call says what a result answers: the policy sees it, and the stored
// artifacts are named after it and belong to its tenant.
type Call struct {
	Method string // "tools/call" or "resources/read"
	Tool   string // tools/call: the tool's name
	URI    string // resources/read: the resource read
	Tenant string // the caller ("" when inbound auth is off)
	// RequestID is the JSON-RPC request's id as its JSON text, and
	// Session the MCP session it came on (""; none): with the upstream,
	// the tool and ctx's span, what each stored artifact records of the
	// call that produced it (artifact.Call).
	RequestID, Session string
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

// Overrides replace some of a Rewriter's Options for the results of one
// upstream of a gateway. Zero fields keep the Rewriter's own.
type Overrides struct {
	Budget, TextThreshold, BinaryThreshold int64
	TTL                                    time.Duration
	// Server names the upstream in policy inputs.
	Server string
	// Metrics, when set, replaces the Rewriter's (a proxy counts into
	// the registry it was given).
	Metrics Metrics
}

// With returns a Rewriter with o in place of f's options, sharing f's
// store, policy, staging and spilled strings. f is unchanged.
func (f *Rewriter) With(o Overrides) *Rewriter {
	n := *f
	if o.Budget > 0 {
		n.o.Budget = o.Budget
	}
	if o.TextThreshold > 0 {
		n.o.TextThreshold = o.TextThreshold
	}
	if o.BinaryThreshold > 0 {
		n.o.BinaryThreshold = o.BinaryThreshold
	}
	if o.TTL > 0 {
		n.o.TTL = o.TTL
	}
	if o.Server != "" {
		n.o.Server = o.Server
	}
	if o.Metrics != nil {
		n.o.Metrics = o.Metrics
	}
	n.budget = Budget{Result: n.o.Budget, Previews: n.o.PreviewBudget}
	return &n
}
