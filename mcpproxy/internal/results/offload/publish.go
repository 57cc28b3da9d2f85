package offload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/artifact/preview"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/shrink"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/policy"
)

// resultWriter carries the publish stage of one rewrite (of one item,
// for resources/read): what it stored and replaced, the content payloads
// structuredContent may repeat, and what it made of each part that
// leaves, for assemble.
type resultWriter struct {
	f             *Rewriter
	c             Call
	previewBudget int
	stored        []artifact.Artifact
	replaced      []replaced
	byLiteral     []literalLink // content payloads stored, for structuredContent to reuse
	scNew         []*published  // artifacts structuredContent added (not reused)
	err           error

	// What publishResult made of the plan, for assemble:
	alone    map[int]*published // content items stored alone, by index; the ones kept inline are absent
	group    *published         // the small text items stored as one; nil: none, or kept inline
	bulk     *published         // the content the transport moved out whole, stored; nil: none, or kept
	shrunk   []byte             // structuredContent shrunk, when scShrunk
	scShrunk bool
	scWhole  *published // structuredContent stored whole, as no small valid form exists; nil otherwise
}

// literalLink is a content payload publish stored, found again by its
// literal when structuredContent repeats it (reuse).
type literalLink struct {
	lit []byte
	pub *published
}

// unit is one thing the offloader may store: a content item, a group of
// items, a member of structuredContent.
type unit struct {
	kind      string // the policy's kind: text, image, audio, resource, structured
	mime      string
	size      int64 // decoded bytes, as far as known before storing
	threshold int64 // the kind's configured threshold, for the policy
	over      bool  // chosen because the result is over its budget
	group     bool  // many items as one
	open      func() io.Reader
	early     *early // the work done on it as it arrived (Tap); nil if none
}

// label is what the unit was, for its artifact's name.
func (u unit) label() string {
	if u.group {
		return "items"
	}
	return u.kind
}

// publishResult stores what the plan r says leaves, in the result's
// order: the content items (each alone, and the group at its first
// item's place), the bulk content, then structuredContent (which may
// reuse what content stored). What it made of each is kept in w for
// assemble; the error is a failed store.
func (w *resultWriter) publishResult(ctx context.Context, r *resultPlan) error {
	if err := w.publishContent(ctx, r.items, r.content); err != nil {
		return err
	}
	if r.bulk != nil {
		if err := w.publishBulk(ctx, r.bulk); err != nil {
			return err
		}
	}
	if r.shrinkSC {
		return w.publishStructured(ctx, r.sc.val, r.scSize)
	}
	return nil
}

// publishContent stores the content items the plan p takes out: each
// alone, and the group as one artifact.
func (w *resultWriter) publishContent(ctx context.Context, items []contentItem, p contentPlan) error {
	w.alone = map[int]*published{}
	for i, it := range items {
		switch {
		case p.alone[i]:
			pub, err := w.publish(ctx, w.itemUnit(it), "/content/"+strconv.Itoa(i))
			if err != nil {
				return err
			}
			if pub != nil {
				w.alone[i] = pub
				w.byLiteral = append(w.byLiteral, literalLink{it.lit, pub})
			}
		case len(p.group) > 0 && i == p.group[0]:
			pub, err := w.publish(ctx, w.f.lit.groupUnit(items, p.group), "/content/"+strconv.Itoa(i))
			if err != nil {
				return err
			}
			if pub != nil {
				w.group = pub
				w.replaced[len(w.replaced)-1].Count = len(p.group)
			}
		}
	}
	return nil
}

// itemUnit is the unit of a content item that leaves alone, it: its
// payload, decoded from base64 or as text, with its mime type sniffed
// when the item names none.
func (w *resultWriter) itemUnit(it contentItem) unit {
	lit, l := it.lit, w.f.lit
	u := unit{kind: it.kind, mime: it.mime, size: it.size, over: true, threshold: w.f.threshold(!it.textual)}
	if it.binary {
		u.open = func() io.Reader { return l.binary(lit) }
		return u
	}
	u.open = func() io.Reader { return l.open(lit) }
	u.early = l.early(lit)
	if u.mime == "" {
		u.mime = sniffText(l.open(lit))
	}
	return u
}

// groupUnit is the unit of many small text items (items[idx]) stored as
// one artifact: a JSON array when every text is JSON (FastMCP sends one
// item per row), else the texts separated by a blank line.
func (l lits) groupUnit(items []contentItem, idx []int) unit {
	allJSON := true
	var size int64
	var text bytes.Buffer // one buffer for every item's decoded text
	for _, i := range idx {
		size += items[i].size
		if allJSON {
			text.Reset()
			_, err := text.ReadFrom(l.open(items[i].lit))
			allJSON = err == nil && json.Valid(text.Bytes())
		}
	}
	sep, first, last, mime := "\n\n", "", "", "text/plain; charset=utf-8"
	if allJSON {
		sep, first, last, mime = ",", "[", "]", "application/json"
	}
	return unit{kind: "text", mime: mime, size: size, over: true, group: true, open: func() io.Reader {
		rs := make([]io.Reader, 0, 2*len(idx)+1)
		rs = append(rs, bytes.NewReader([]byte(first)))
		for k, i := range idx {
			if k > 0 {
				rs = append(rs, bytes.NewReader([]byte(sep)))
			}
			rs = append(rs, l.open(items[i].lit))
		}
		return io.MultiReader(append(rs, bytes.NewReader([]byte(last)))...)
	}}
}

// publishBulk stores content that the transport moved out whole, s, as
// one artifact.
func (w *resultWriter) publishBulk(ctx context.Context, s Spilled) error {
	u, count := contentUnit(s)
	pub, err := w.publish(ctx, u, "/content")
	if err != nil {
		return err
	}
	if pub != nil {
		w.replaced[len(w.replaced)-1].Count = count
		w.bulk = pub
	}
	return nil
}

// contentUnit is the unit of a result's content that the transport
// moved out whole, s (a tool that answers with thousands of items). When
// every item is text it is stored as groupUnit stores many items, and s
// is read twice from disk (once to see what the items are); otherwise
// the items themselves are stored, as JSON. count is the number of
// items, 0 when not every item is text.
func contentUnit(s Spilled) (u unit, count int) {
	u = unit{kind: "text", group: true, size: s.Len(), over: true, mime: "application/json", open: s.Raw}
	allText, allJSON := true, true
	eachText(s.Raw(), func(text []byte, ok bool) bool {
		count++
		allText = allText && ok
		allJSON = allJSON && ok && json.Valid(text)
		return allText
	})
	if !allText {
		return u, 0
	}
	sep, first, last := "\n\n", "", ""
	if allJSON {
		sep, first, last = ",", "[", "]"
	} else {
		u.mime = "text/plain; charset=utf-8"
	}
	u.open = func() io.Reader {
		pr, pw := io.Pipe()
		go func() {
			bw := bufio.NewWriterSize(pw, 32<<10)
			bw.WriteString(first)
			n := 0
			eachText(s.Raw(), func(text []byte, _ bool) bool {
				if n++; n > 1 {
					bw.WriteString(sep)
				}
				_, err := bw.Write(text)
				return err == nil
			})
			bw.WriteString(last)
			pw.CloseWithError(bw.Flush())
		}()
		return pr
	}
	return u, count
}

// publishStructured shrinks structuredContent, sc (scSize bytes as the
// agent would receive it), to a preview valid for the tool's
// outputSchema (structured). When no such value exists it stores sc
// whole instead: assemble then makes the result a tool error without
// structuredContent (clients skip the schema check on errors), with the
// whole value behind a link.
func (w *resultWriter) publishStructured(ctx context.Context, sc []byte, scSize int64) error {
	v, ok := w.structured(ctx, sc)
	switch {
	case w.err != nil:
		return w.err
	case ok:
		w.shrunk, w.scShrunk = v, true
		return nil
	}
	l := w.f.lit
	pub, err := w.publish(ctx, unit{kind: "structured", mime: "application/json", size: scSize, over: true, threshold: w.f.o.TextThreshold,
		open: func() io.Reader { return l.reader(sc) }}, "/structuredContent")
	w.scWhole = pub // nil when the policy keeps it inline, or the store failed
	return err
}

// structured shrinks a large structuredContent (an object) to a preview
// that validates against the tool's outputSchema: the members that hold
// the bytes are stored and replaced (a string by its preview with the
// link first, an array by its first items), and NoteMember says so with
// every link of the result. ok is false when no such value exists, when
// the schema is unusable for it (shrink.ErrSchema), when it cuts an array
// or object and the schema refuses the note (see noted), or when the
// policy keeps a member inline; w.err is set when a store failed.
func (w *resultWriter) structured(ctx context.Context, sc []byte) (out []byte, ok bool) {
	if w.c.SchemaErr != nil {
		w.f.log.Warn("the tool's outputSchema is unusable; a large structuredContent makes its result a tool error", "tool", w.c.Tool, "err", w.c.SchemaErr)
		return nil, false
	}
	nRep, nNew := len(w.replaced), len(w.scNew)
	orig := sc
	sc, pre, err := w.unspill(ctx, sc)
	notes := w.linkLines()
	cut := func(c shrink.Cut) (string, error) { return w.cut(ctx, c, orig, pre) }
	var v []byte
	var cuts []shrink.Cut
	if err == nil {
		v, cuts, err = shrink.Shrink(ctx, sc, w.c.Schema, shrink.Options{Budget: w.f.budget.forShrunk(len(notes))}, cut)
	}
	if err == nil {
		v, err = w.noted(v, cuts, sc, pre)
	}
	if err != nil {
		// What it stored stays for the sweeper; the result names none of it.
		w.replaced, w.scNew = w.replaced[:nRep], w.scNew[:nNew]
		w.shrinkFailed(err)
		return nil, false
	}
	return v, true
}

// unspill stores each value of sc that the transport spilled to disk (a
// string or an array of any size; the shrinker would see only its short
// marker) and puts a preview in its place: a string's preview with its
// link, an array's first elements. pre maps their pointers (in sc) to
// what was stored.
func (w *resultWriter) unspill(ctx context.Context, sc []byte) (out []byte, pre map[string]*published, err error) {
	var spans [][2]int
	var ptrs []string
	l := w.f.lit
	l.spilledValues(sc, "", 0, func(sp [2]int, ptr string) {
		spans, ptrs = append(spans, sp), append(ptrs, ptr)
	})
	if len(spans) == 0 {
		return sc, nil, nil
	}
	pre = map[string]*published{}
	out = make([]byte, 0, len(sc)+len(spans)*(w.previewBudget+256))
	last := 0
	for k, sp := range spans {
		lit, ptr := sc[sp[0]:sp[1]], "/structuredContent"+ptrs[k]
		s, _ := l.spilled(lit)
		var repl []byte
		p := w.reuse(lit)
		switch {
		case p != nil:
			w.replaced = append(w.replaced, newReplaced(ptr, p))
		default:
			u := unit{kind: "structured", mime: "application/json", size: s.Len(), over: true, threshold: w.f.o.TextThreshold, open: s.Raw}
			if s.Kind() != "array" {
				u.open, u.mime = s.Text, sniffText(s.Text())
			}
			if p, err = w.publish(ctx, u, ptr); err != nil {
				w.err = err
				return nil, nil, err
			}
			if p == nil {
				return nil, nil, errKeep
			}
			w.scNew = append(w.scNew, p)
		}
		pre[ptrs[k]] = p
		if s.Kind() == "array" {
			repl = s.First()
		} else {
			repl, _ = json.Marshal(p.sentence + "\n" + p.body)
		}
		out = append(append(out, sc[last:sp[0]]...), repl...)
		last = sp[1]
	}
	return append(out, sc[last:]...), pre, nil
}

// cut stores a member of structuredContent that the shrinker cuts, c,
// and returns the text it stands for in the shrunk value: for a string,
// its link and preview (reusing what content stored of the same bytes);
// for an array or object, nothing (noted says so). orig is
// structuredContent as sent, pre what unspill already stored of it. The
// error is errKeep when the policy keeps the member inline, or a failed
// store (also in w.err).
func (w *resultWriter) cut(ctx context.Context, c shrink.Cut, orig []byte, pre map[string]*published) (string, error) {
	ptr := "/structuredContent" + c.Pointer
	if p := pre[c.Pointer]; p != nil { // stored whole before shrinking
		if c.Kind == "string" {
			return p.sentence + "\n" + p.body, nil
		}
		return "", nil
	}
	if c.Kind == "string" {
		if p := w.reuse(c.Raw); p != nil {
			w.replaced = append(w.replaced, newReplaced(ptr, p))
			return p.sentence + "\n" + p.body, nil
		}
	}
	raw, l := c.Raw, w.f.lit
	if len(pre) > 0 && c.Kind != "string" {
		if o := valueAt(orig, c.Pointer); o != nil {
			raw = o // as sent, not with the previews unspill put in
		}
	}
	u := unit{kind: "structured", mime: "application/json", size: l.rawLen(raw), over: true, threshold: w.f.o.TextThreshold,
		open: func() io.Reader { return l.reader(raw) }}
	if c.Kind == "string" {
		u.open = func() io.Reader { return l.open(raw) }
		u.mime = sniffText(l.open(raw))
	}
	p, err := w.publish(ctx, u, ptr)
	if err != nil {
		w.err = err
		return "", err
	}
	if p == nil {
		return "", errKeep
	}
	w.scNew = append(w.scNew, p)
	return p.sentence + "\n" + p.body, nil
}

// reuse finds a content payload stored in this rewrite whose literal is
// byte-identical to lit (servers repeat their text in structuredContent).
func (w *resultWriter) reuse(lit []byte) *published {
	for _, l := range w.byLiteral {
		if w.f.lit.same(l.lit, lit) {
			return l.pub
		}
	}
	return nil
}

// linkLines lists every artifact of the result so far, one sentence each.
func (w *resultWriter) linkLines() string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, r := range w.replaced {
		if seen[r.URI] {
			continue
		}
		seen[r.URI] = true
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("Full value of " + r.Pointer + " (" + r.MimeType + "): " + r.HTTPURL + " until " + r.HTTPURLExpiresAt + ".")
	}
	return b.String()
}

// noted returns the shrunk value v with NoteMember added, where the
// schema the client holds accepts it. A cut string carries its own link
// in its text; a cut array or object (cuts, or an array unspill kept the
// first items of, in pre) says nothing where it stands, so a value with
// one and no note is never returned: the error is errSilent, and the
// result takes the path of an unusable schema instead (a tool error with
// the whole value behind a link), since a host that shows its model
// structuredContent alone would show the part as the whole.
func (w *resultWriter) noted(v []byte, cuts []shrink.Cut, sc []byte, pre map[string]*published) ([]byte, error) {
	silent := slices.ContainsFunc(cuts, func(c shrink.Cut) bool { return c.Kind != "string" })
	for ptr := range pre {
		if at := valueAt(sc, ptr); len(at) > 0 && at[0] == '[' {
			silent = true
		}
	}
	if jsonrpc.RawMember(v, NoteMember) == nil { // not the server's own member of that name
		note, _ := json.Marshal("This structuredContent is a shortened preview of the tool's output. " + w.linkLines())
		withNote, _ := jsonrpc.SetPath(v, note, NoteMember)
		if w.c.Schema == nil || w.c.Schema.Validate(withNote) == nil {
			return withNote, nil
		}
	}
	if silent {
		return nil, errSilent
	}
	return v, nil // Shrink validated v itself
}

// NoteMember is the member the offloader adds to a shrunk
// structuredContent: a sentence saying it is a preview, with every link of
// the result, for hosts that show a model structuredContent alone.
const NoteMember = "_spillway"

// errSilent is noted's error for a shortened value that cannot say so.
var errSilent = errors.New("offload: the schema refuses the note of a shortened structuredContent")

// errKeep aborts shrinking when the policy keeps a member inline.
var errKeep = errors.New("offload: the policy keeps the member inline")

// shrinkFailed logs why structured found no shrunk value (err). The
// expected cases are not logged here: no value fits (shrink.ErrNoFit),
// the policy kept a member inline (errKeep), or a store failed (w.err:
// withhold logs it).
func (w *resultWriter) shrinkFailed(err error) {
	switch {
	case errors.Is(err, shrink.ErrSchema):
		w.f.log.Warn("the tool's outputSchema is unusable for this structuredContent; the result becomes a tool error", "tool", w.c.Tool, "err", err)
	case errors.Is(err, errSilent):
		w.f.log.Warn("the tool's outputSchema refuses the note a shortened structuredContent needs; the result becomes a tool error", "tool", w.c.Tool)
	case !errors.Is(err, shrink.ErrNoFit) && !errors.Is(err, errKeep) && w.err == nil:
		w.f.log.Warn("shrinking structuredContent failed", "tool", w.c.Tool, "err", err)
	}
}

// publish asks the policy about u and, unless it keeps u inline (nil,
// nil), stores it, mints its link, builds its preview and records it
// under ptr (a JSON pointer into the result; "" records nothing). The
// error is a failed store, wrapping ErrStalled when the stall watch
// stopped it; a failed decision keeps u inline instead.
func (w *resultWriter) publish(ctx context.Context, u unit, ptr string) (p *published, err error) {
	call := w.provenance(ctx) // the request's span, not the offload's below
	ctx, sp := startOffload(ctx, u)
	defer func() { endOffload(sp, p, err) }()
	d, offloadID, ok := w.decide(ctx, u)
	if !ok {
		return nil, nil
	}
	meta := w.artifactFor(u)
	meta.Call = call
	src := u.open()
	if c, ok := src.(io.Closer); ok {
		defer c.Close() // a store that stops early must not leave the source's writer waiting
	}
	src, pb, beside := w.previewBeside(ctx, u, meta, src)
	defer pb.Close() // an image to thumbnail waits in a file: freed at once if the store fails
	endStoring := storing(ctx)
	pctx, mint := w.f.recording(ctx)
	a, l, err := w.f.svc.Publish(pctx, meta, src, artifact.LinkOptions{TTL: w.ttl(d), Tenant: w.c.Tenant, Audience: d.Audience, Source: "offload"})
	endStoring()
	if beside != nil {
		beside.Close()
	}
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, ErrStalled) {
			err = fmt.Errorf("%w (%w)", cause, err) // the store only saw its context end
		}
		return nil, fmt.Errorf("storing the item failed: %w", err)
	}
	w.f.svc.AuditOffload(ctx, a, l, artifact.OffloadEvent{Kind: u.kind, OffloadDecision: offloadID, MintDecision: mint.ID()})
	p = newPublished(ctx, a, l, meta.MimeType, pb)
	w.f.counted(u, p)
	w.stored = append(w.stored, a)
	if ptr != "" {
		w.replaced = append(w.replaced, newReplaced(ptr, p))
	}
	return p, nil
}

// decide asks the policy whether u leaves the result; false keeps it
// inline, as a failed decision does. id names the decision in the audit
// trail ("" without one).
func (w *resultWriter) decide(ctx context.Context, u unit) (d policy.OffloadDecision, id string, ok bool) {
	f, c := w.f, w.c
	ctx, rec := f.recording(ctx)
	d, err := f.dec.Offload(ctx, policy.OffloadInput{
		Server: f.o.Server, Tool: c.Tool, Method: c.Method, Kind: u.kind,
		MimeType: u.mime, Size: u.size, Tenant: c.Tenant, Threshold: u.threshold,
		Budget: f.budget.Result, OverBudget: u.over, Claims: identity.ClaimsFrom(ctx),
	})
	if err != nil {
		f.log.Warn("offload decision failed; keeping the item inline", "err", err)
		return d, rec.ID(), false
	}
	return d, rec.ID(), d.Offload
}

// ttl is how long the links to what d offloads last: the policy's
// choice, else Options.TTL.
func (w *resultWriter) ttl(d policy.OffloadDecision) time.Duration {
	if d.TTLSeconds > 0 {
		return time.Duration(d.TTLSeconds) * time.Second
	}
	return w.f.o.TTL
}

// artifactFor is the artifact u is stored as. Its name says what it is
// and is unique in a listing: query-items-3f2abc.json,
// read_graph-structured-x7k2ab.json.
func (w *resultWriter) artifactFor(u unit) artifact.Artifact {
	mime := mimeOr(u.mime, "application/octet-stream")
	name, source := w.c.Tool, "tool:"+w.c.Tool
	if w.c.Method == "resources/read" {
		name, source = path.Base(w.c.URI), "resources/read"
	}
	id := artifact.NewID()
	return artifact.Artifact{
		ID:       id,
		Name:     fmt.Sprintf("%s-%s-%s%s", safeName(name), u.label(), id[:6], extension(mime)),
		MimeType: mime,
		Tenant:   w.c.Tenant,
		Source:   source,
	}
}

// safeName keeps a name's letters, digits, '_', '-' and '.', up to 48
// bytes: a tool's or resource's name is the upstream's to choose.
func safeName(s string) string {
	b := make([]byte, 0, min(len(s), 48))
	for i := 0; i < len(s) && len(b) < 48; i++ {
		switch c := s[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
			b = append(b, c)
		default:
			b = append(b, '_')
		}
	}
	if len(b) == 0 || b[0] == '.' {
		b = append([]byte("x"), b...)
	}
	return string(b)
}

// previewBeside sets up the preview of u, stored as a from src, and
// returns the reader the store is to read. The preview is the one built
// while a text arrived (early), when there is one for a's mime type. Else
// a new one reads the staged copy the store takes as it is, first and as
// far as it needs (an image's header, not its gigabyte), or is built
// beside the store's write and hash (aside: the caller closes it once the
// store is done).
func (w *resultWriter) previewBeside(ctx context.Context, u unit, a artifact.Artifact, src io.Reader) (io.Reader, *preview.Builder, *aside) {
	f := w.f
	st, staged := artifact.StagingOf(src)
	staged = staged && takesStaging(f.svc) // the store takes it as it is, reading none of it
	if !staged {
		src = artifact.ProgressReader(ctx, src) // what the store reads is progress (see StoreStall)
	}
	thumb := u.kind == "image" && !f.o.NoThumbnails
	var pb *preview.Builder
	if !thumb {
		pb = u.early.take(a.MimeType) // built while the text arrived: the store only copies
	}
	if pb != nil {
		pb.SetBudget(w.previewBudget)
		return src, pb, nil
	}
	pb = preview.New(preview.Options{MimeType: a.MimeType, Name: a.Name, Budget: w.previewBudget,
		Thumbnail: thumb, ThumbMax: f.o.ThumbMax, Size: u.size, TempDir: f.o.StageDir})
	if staged {
		pb.Feed(st, st.Size())
		return src, pb, nil
	}
	beside := newAside(pb)
	return io.TeeReader(src, beside), pb, beside
}

// take hands publish the preview built while the text arrived, with all
// of the text written to it, if it was built for mime and not taken
// before; otherwise it returns nil and publish builds one.
func (e *early) take(mime string) *preview.Builder {
	if e == nil {
		return nil
	}
	<-e.done
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.complete || e.pb == nil || e.mime != mime {
		return nil
	}
	pb := e.pb
	e.pb = nil
	return pb
}

// takesStaging reports whether svc's store takes a staging as it is
// (artifact.Stager) rather than reading it like any source.
func takesStaging(svc *artifact.Service) bool {
	_, ok := svc.Store.(artifact.Stager)
	return ok
}

// newPublished is what the agent is shown of artifact a, stored as mime:
// its link l, pb's preview, and a sentence saying where the whole is.
func newPublished(ctx context.Context, a artifact.Artifact, l artifact.Link, mime string, pb *preview.Builder) *published {
	pv := previewWhileCalled(ctx, pb)
	p := &published{a: a, l: l, thumb: pv.Thumbnail, body: pv.Text,
		sentence: sentence(a.Size, mime, l.URL, l.Expires, artifact.URI(a.ID))}
	if p.body != "" && !strings.HasSuffix(p.body, "\n") {
		p.body += "\n"
	}
	p.text = p.body + p.sentence
	return p
}

// published is a unit stored, with its link and what the agent is shown.
type published struct {
	a        artifact.Artifact
	l        artifact.Link
	body     string // what the preview says of the bytes
	sentence string // where they are and how to get them
	text     string // body and sentence: the text item's text
	thumb    *preview.Image
}

// sentence says where the whole of what a preview shows is, and how to
// get it. What the preview itself says of the bytes is package
// preview's (artifact/preview).
func sentence(size int64, mime, url string, expires time.Time, uri string) string {
	return fmt.Sprintf("The full content (%s, %s) is at %s until %s: fetch it with a plain HTTP GET (no MCP session needed), or read %s.",
		humanSize(size), mimeOr(mime, "application/octet-stream"), url, expires.UTC().Format(timeFormat), uri)
}

// timeFormat is how the links' expiry times are written.
const timeFormat = time.RFC3339

// humanSize writes a size in bytes as people read it ("1.5 MiB").
var humanSize = preview.HumanSize

// mimeOr returns m, or def when m is empty.
func mimeOr(m, def string) string {
	if m == "" {
		return def
	}
	return m
}

// replaced is one MetaReplaced entry.
type replaced struct {
	Pointer          string `json:"pointer"`
	Count            int    `json:"count,omitempty"` // a group: the items it holds
	URI              string `json:"uri"`
	HTTPURL          string `json:"httpUrl"`
	HTTPURLExpiresAt string `json:"httpUrlExpiresAt"`
	Size             int64  `json:"size"`
	MimeType         string `json:"mimeType"`
	SHA256           string `json:"sha256"`
}

// newReplaced is the MetaReplaced entry for p, stored from the place ptr
// of the result.
func newReplaced(ptr string, p *published) replaced {
	return replaced{Pointer: ptr, URI: artifact.URI(p.a.ID), HTTPURL: p.l.URL,
		HTTPURLExpiresAt: p.l.Expires.UTC().Format(timeFormat), Size: p.a.Size,
		MimeType: p.a.MimeType, SHA256: p.a.SHA256}
}
