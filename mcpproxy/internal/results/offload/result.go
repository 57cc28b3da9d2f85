package offload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sort"
	"strconv"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// MetaReplaced is the result _meta key listing every place of a tools/call
// result the offloader replaced, each with its link: code reading the
// result learns there that what it holds is a preview.
const MetaReplaced = "dev.spillway/replaced"

// NoteMember is the member the offloader adds to a shrunk
// structuredContent: a sentence saying it is a preview, with every link of
// the result, for hosts that show a model structuredContent alone.
const NoteMember = "_spillway"

// unitCost is about what one offloaded unit adds back to a result: its
// preview (at its smallest) and its resource_link. Offloading less than
// this would grow the result.
const unitCost = 1024

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

func newReplaced(ptr string, p *published) replaced {
	return replaced{Pointer: ptr, URI: artifact.URI(p.a.ID), HTTPURL: p.l.URL,
		HTTPURLExpiresAt: p.l.Expires.UTC().Format(timeFormat), Size: p.a.Size,
		MimeType: p.a.MimeType, SHA256: p.a.SHA256}
}

// Budget is how a tools/call result's room is shared out. Result is
// Options.Budget: what the agent receives inline of content and
// structuredContent together, previews and links included. Previews is
// Options.PreviewBudget: the preview text all the offloaded parts of one
// result share. New makes it from Options; each split of the result's
// room is one of its methods, so that a reader finds them in one place.
type Budget struct {
	Result   int64
	Previews int
}

const (
	// minPreview is the least preview text one offloaded part gets,
	// however many parts share Budget.Previews (Options.PreviewBudget
	// promises it).
	minPreview = 256
	// linkLineRoom is what a shrunk structuredContent leaves free for one
	// more link line: the note names every link of the result, and the
	// value being shrunk may add its own.
	linkLineRoom = 400
	// minShrunk is the least room a shrunk structuredContent is given,
	// however many link lines its note already carries.
	minShrunk = 256
)

// over reports whether size bytes, as the agent would receive them, are
// over the result's budget. Such a result has its largest parts
// offloaded, and one whose store fails is withheld instead of passed
// inline.
func (b Budget) over(size int64) bool { return size > b.Result }

// structuredShare is the part of the budget structuredContent gets when it
// is shrunk: a third, so that content keeps two thirds. A
// structuredContent larger than this, in a result over the budget, is
// shrunk.
func (b Budget) structuredShare() int64 { return b.Result / 3 }

// forContent is what content may weigh once structuredContent has its
// part: its own size when it stays as it is (scKept), else its share,
// which is held back also when there is no structuredContent.
func (b Budget) forContent(scKept bool, scSize int64) int64 {
	if scKept {
		return b.Result - scSize
	}
	return b.Result - b.structuredShare()
}

// forShrunk is the size the shrinker aims a structuredContent at: its
// share less the note's link lines so far (notes bytes) and room for one
// more, at least minShrunk.
func (b Budget) forShrunk(notes int) int {
	return max(int(b.structuredShare())-notes-linkLineRoom, minShrunk)
}

// perPreview is the preview text each of parts offloaded parts gets: an
// equal share of Previews, at least minPreview.
func (b Budget) perPreview(parts int) int { return max(minPreview, b.Previews/max(parts, 1)) }

// contentItem is one element of a tools/call result's content.
type contentItem struct {
	raw    []byte
	kind   string // text, image, audio, resource; "" for what is never offloaded
	lit    []byte // the string literal holding the payload
	binary bool
	mime   string
	uri    string // an embedded resource's
	// textual: text, or a blob whose mime type says text (a CSV as a blob
	// gets the text threshold, as the same CSV as text does)
	textual bool
	size    int64 // decoded bytes (base64 estimated exactly, text as escaped)
	weight  int64 // len(raw) as the client would receive it (spilled strings counted whole)
}

func (l lits) parseItem(it []byte) contentItem {
	c := contentItem{raw: it, weight: l.rawLen(it)}
	if len(it) == 0 || it[0] != '{' {
		return c
	}
	typ := jsonrpc.StringMember(it, "type")
	c.mime = jsonrpc.StringMember(it, "mimeType")
	switch typ {
	case "text":
		c.lit = jsonrpc.RawMember(it, "text")
	case "image", "audio":
		c.lit, c.binary = jsonrpc.RawMember(it, "data"), true
	case "resource":
		if r, ok := jsonrpc.Member(it, "resource"); ok && it[r[0]] == '{' {
			res := it[r[0]:r[1]]
			c.mime, c.uri = jsonrpc.StringMember(res, "mimeType"), jsonrpc.StringMember(res, "uri")
			c.lit, c.binary = pick(res)
		}
	}
	if len(c.lit) < 2 || c.lit[0] != '"' {
		c.lit = nil
		return c
	}
	c.kind = typ
	c.size = l.len(c.lit)
	if c.binary {
		c.size = base64Size(c.size, c.lit)
	}
	c.textual = !c.binary || IsText(c.mime)
	return c
}

// contentPlan says which content items leave a result: chosen alone, or
// grouped into one artifact.
type contentPlan struct {
	alone map[int]bool
	group []int // indexes, in order; empty: no group
}

// planContent picks what leaves so that the content fits budget: first
// every item over its kind's threshold, then (when the result is over
// its budget) the largest items, then the remaining small text items
// together, then whatever else is large enough to be worth a link.
func (f *Rewriter) planContent(items []contentItem, budget int64, over bool) contentPlan {
	pl := newPlanner(items)
	for _, i := range pl.order {
		if it := items[i]; it.kind != "" && it.size > f.threshold(!it.textual) {
			pl.take(i)
		}
	}
	if !over || pl.takeLarge(budget) {
		return pl.p
	}
	pl.groupTexts()
	pl.takeRest(budget)
	return pl.p
}

// planner is planContent's work: the plan so far, and what content
// weighs with it.
type planner struct {
	items  []contentItem
	order  []int // indexes of items, heaviest first
	inline int64 // what content weighs with the plan so far
	p      contentPlan
}

func newPlanner(items []contentItem) *planner {
	pl := &planner{items: items, order: make([]int, len(items)), p: contentPlan{alone: map[int]bool{}}}
	for i := range items {
		pl.order[i] = i
		pl.inline += items[i].weight
	}
	sort.SliceStable(pl.order, func(a, b int) bool { return items[pl.order[a]].weight > items[pl.order[b]].weight })
	return pl
}

// take plans item i to leave alone: its weight leaves, its preview and
// link come in.
func (pl *planner) take(i int) {
	pl.p.alone[i] = true
	pl.inline += unitCost - pl.items[i].weight
}

// texts returns the text items that stay so far, and their weight.
func (pl *planner) texts() (texts []int, weight int64) {
	for i, it := range pl.items {
		if it.kind == "text" && !pl.p.alone[i] {
			texts = append(texts, i)
			weight += it.weight
		}
	}
	return texts, weight
}

// takeLarge takes the largest items, heaviest first, until content fits
// budget; true when it does. A text item goes alone when it holds a good
// part of the text (one log among small notes); many like-sized ones are
// left to groupTexts.
func (pl *planner) takeLarge(budget int64) bool {
	texts, textBytes := pl.texts()
	for _, i := range pl.order {
		if pl.inline <= budget {
			return true
		}
		it := pl.items[i]
		if it.kind == "" || pl.p.alone[i] || it.weight <= 2*unitCost {
			continue
		}
		if it.kind != "text" || len(texts) <= 4 || it.weight >= textBytes/4 {
			pl.take(i)
		}
	}
	return false
}

// groupTexts plans the text items that stay to leave together, as one
// artifact, when there are two or more and they weigh more than the
// unit that replaces them.
func (pl *planner) groupTexts() {
	texts, textBytes := pl.texts()
	if len(texts) >= 2 && textBytes > unitCost {
		pl.p.group = texts
		pl.inline += unitCost - textBytes
	}
}

// takeRest takes whatever else is worth a link, heaviest first, until
// content fits budget.
func (pl *planner) takeRest(budget int64) {
	grouped := map[int]bool{}
	for _, i := range pl.p.group {
		grouped[i] = true
	}
	for _, i := range pl.order {
		if pl.inline <= budget {
			break
		}
		if it := pl.items[i]; it.kind != "" && !pl.p.alone[i] && !grouped[i] && it.weight > unitCost {
			pl.take(i)
		}
	}
}

func (f *Rewriter) threshold(binary bool) int64 {
	if binary {
		return f.o.BinaryThreshold
	}
	return f.o.TextThreshold
}

// rewriteResult is Rewrite for a tools/call result, in three stages:
// plan (what leaves, within one budget for content and structuredContent
// together), publish (store each part that leaves, with its preview and
// link) and assemble (write the result with them in place).
func (f *Rewriter) rewriteResult(ctx context.Context, c Call, result []byte) ([]byte, []artifact.Artifact, error) {
	r, ok := f.planResult(result)
	if !ok {
		return result, nil, nil
	}
	w := &resultWriter{f: f, c: c, previewBudget: r.previewBudget}
	if err := w.publishResult(ctx, r); err != nil {
		return f.withhold(c, result, w.stored, err)
	}
	out, changed := w.assemble(r)
	if !changed {
		return result, w.stored, nil // the policy kept everything inline
	}
	return out, w.stored, nil
}

// resultPlan is what the plan stage decides for one tools/call result:
// the result taken apart, and which of its parts leave.
type resultPlan struct {
	mem      objectMembers // the result's members, written back by assemble
	sc       *member       // structuredContent; nil when absent
	meta     *member       // _meta; nil when absent
	items    []contentItem // content's items, when content is an array held in memory
	bulk     Spilled       // content, when the transport moved it out whole; nil otherwise
	scSize   int64         // structuredContent's weight as the agent would receive it
	shrinkSC bool          // structuredContent leaves: shrunk, or else stored whole
	content  contentPlan   // the content items that leave
	// previewBudget is each offloaded part's share of the preview text.
	previewBudget int
}

// planResult decides what leaves a tools/call result. ok is false when
// nothing does: the result is not an object, or it fits as it is.
func (f *Rewriter) planResult(result []byte) (r *resultPlan, ok bool) {
	mem, ok := members(result)
	if !ok {
		return nil, false
	}
	r = &resultPlan{mem: mem, sc: mem.get("structuredContent"), meta: mem.get("_meta")}
	if content := mem.get("content"); content != nil {
		if bulk, spilled := f.lit.array(content.val); spilled {
			r.bulk = bulk
		} else if content.val[0] == '[' {
			for _, e := range jsonrpc.Elements(content.val, [2]int{0, len(content.val)}) {
				r.items = append(r.items, f.lit.parseItem(content.val[e[0]:e[1]]))
			}
		}
	}
	over := f.budget.over(f.lit.rawLen(result))
	if r.sc != nil {
		r.scSize = f.lit.rawLen(r.sc.val)
	}
	r.shrinkSC = over && r.sc != nil && r.sc.val[0] == '{' && r.scSize > f.budget.structuredShare()
	r.content = f.planContent(r.items, f.budget.forContent(r.sc != nil && !r.shrinkSC, r.scSize), over)
	units := r.units()
	if units == 0 {
		return nil, false
	}
	r.previewBudget = f.budget.perPreview(units)
	return r, true
}

// units counts the parts of the result that leave, each with a preview:
// the items alone, the group, the bulk content and structuredContent.
func (r *resultPlan) units() int {
	n := len(r.content.alone)
	if r.bulk != nil {
		n++
	}
	if len(r.content.group) > 0 {
		n++
	}
	if r.shrinkSC {
		n++
	}
	return n
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

// publishBulk stores a content the transport moved out whole, s, as one
// artifact.
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

// assemble writes the rewritten result: the plan r's members with what
// w published in place of what left, the links that only
// structuredContent names added to content, and MetaReplaced in _meta.
// changed is false when the policy kept everything inline.
func (w *resultWriter) assemble(r *resultPlan) (out []byte, changed bool) {
	items := w.contentItems(r.items, r.content)
	if w.bulk != nil {
		items = [][]byte{textItem(w.bulk.text), w.bulk.link("text", "")}
	}
	// addItem appends to content, the items kept as they were if none
	// was replaced.
	addItem := func(it []byte) {
		if items == nil {
			for _, old := range r.items {
				items = append(items, old.raw)
			}
		}
		items = append(items, it)
	}
	changed = items != nil
	switch {
	case w.scShrunk:
		r.sc.val, changed = w.shrunk, true
	case w.scWhole != nil:
		changed = true
		r.mem.remove("structuredContent")
		r.mem.setOrAdd("isError", []byte("true"))
		addItem(textItem("The tool succeeded, but its structured output (" + humanSize(w.scWhole.a.Size) +
			") does not fit this result in a form its output schema accepts, so it is marked as an error. " + w.scWhole.sentence))
	}
	if !changed {
		return nil, false
	}
	if extra := w.structuredLinks(); extra != "" {
		addItem(textItem(extra))
	}
	if items != nil {
		r.mem.setOrAdd("content", jsonArray(items))
	}
	if len(w.replaced) > 0 {
		m := []byte(`{}`)
		if r.meta != nil && r.meta.val[0] == '{' {
			m = r.meta.val
		}
		list, _ := json.Marshal(w.replaced)
		m, _ = jsonrpc.SetPath(m, list, MetaReplaced)
		r.mem.setOrAdd("_meta", m)
	}
	return r.mem.encode(), true
}

// contentItems is content with each item publish stored in its place: a
// text item with its preview and a resource_link (an image's thumbnail
// first), the group's once at its first item's place. It is nil when
// none was stored.
func (w *resultWriter) contentItems(items []contentItem, p contentPlan) [][]byte {
	if len(w.alone) == 0 && w.group == nil {
		return nil
	}
	group := map[int]bool{}
	for _, i := range p.group {
		group[i] = true
	}
	var out [][]byte
	for i, it := range items {
		switch pub := w.alone[i]; {
		case pub != nil:
			if th := pub.thumbnail(); th != nil {
				out = append(out, th)
			}
			out = append(out, textItem(pub.text), pub.link(it.kind, it.uri))
		case group[i] && w.group != nil && i == p.group[0]:
			out = append(out, textItem(w.group.text), w.group.link("text", ""))
		case group[i] && w.group != nil:
			// in the group's artifact
		default:
			out = append(out, it.raw)
		}
	}
	return out
}

// withhold ends a rewrite whose store failed: a result over the budget,
// or any with FailClosed, becomes a tool error; otherwise the result
// passes as it came.
func (f *Rewriter) withhold(c Call, result []byte, stored []artifact.Artifact, err error) ([]byte, []artifact.Artifact, error) {
	if size := f.lit.rawLen(result); f.o.FailClosed || f.budget.over(size) {
		f.log.Error("offload failed; withholding the result", "method", c.Method, "tool", c.Tool, "bytes", size, "err", err)
		return withheld(size), stored, nil
	}
	f.log.Warn("offload failed; the result passes inline", "method", c.Method, "tool", c.Tool, "err", err)
	return result, stored, nil
}

// resultWriter carries one tools/call rewrite: what it stored and
// replaced, and the items whose bytes structuredContent may repeat.
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

type literalLink struct {
	lit []byte
	pub *published
}

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

// groupUnit stores the texts of many small items as one artifact: a JSON
// array when every text is JSON (FastMCP's one item per row), else the
// texts separated by a blank line.
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

// structuredLinks is the sentence content gets for the artifacts only
// structuredContent refers to, so that a model reading content alone
// finds them too.
func (w *resultWriter) structuredLinks() string {
	if len(w.scNew) == 0 {
		return ""
	}
	s := "structuredContent holds a shortened preview."
	for _, p := range w.scNew {
		s += " " + p.sentence
	}
	return s
}

// textItem is a text content item.
func textItem(s string) []byte {
	b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
	return b
}

func jsonArray(items [][]byte) []byte {
	out := []byte{'['}
	for i, it := range items {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it...)
	}
	return append(out, ']')
}

// errKeep aborts shrinking when the policy keeps a member inline.
var errKeep = errors.New("offload: the policy keeps the member inline")
