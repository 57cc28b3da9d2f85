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

// plan says which content items leave a result: chosen alone, or grouped
// into one artifact.
type plan struct {
	alone map[int]bool
	group []int // indexes, in order; empty: no group
}

// planContent picks what leaves so that the content fits budget: first
// every item over its kind's threshold, then the largest items, then the
// remaining small text items together, then whatever else is large
// enough to be worth a link.
func (f *Rewriter) planContent(items []contentItem, budget int64, over bool) plan {
	p := plan{alone: map[int]bool{}}
	order := make([]int, len(items))
	var inline int64
	for i := range items {
		order[i] = i
		inline += items[i].weight
	}
	sort.SliceStable(order, func(a, b int) bool { return items[order[a]].weight > items[order[b]].weight })
	take := func(i int) {
		p.alone[i] = true
		inline += unitCost - items[i].weight
	}
	for _, i := range order {
		it := items[i]
		if it.kind != "" && it.size > f.threshold(!it.textual) {
			take(i)
		}
	}
	if !over {
		return p
	}
	var texts []int
	var textBytes int64
	for i, it := range items {
		if it.kind == "text" && !p.alone[i] {
			texts = append(texts, i)
			textBytes += it.weight
		}
	}
	// A text item goes alone when it holds a good part of the text (one
	// log among small notes); many like-sized ones go together below.
	for _, i := range order {
		if inline <= budget {
			return p
		}
		it := items[i]
		if it.kind == "" || p.alone[i] || it.weight <= 2*unitCost {
			continue
		}
		if it.kind != "text" || len(texts) <= 4 || it.weight >= textBytes/4 {
			take(i)
		}
	}
	texts, textBytes = texts[:0], 0
	for i, it := range items {
		if it.kind == "text" && !p.alone[i] {
			texts = append(texts, i)
			textBytes += it.weight
		}
	}
	if len(texts) >= 2 && textBytes > unitCost {
		p.group = texts
		inline += unitCost - textBytes
	}
	grouped := map[int]bool{}
	for _, i := range p.group {
		grouped[i] = true
	}
	for _, i := range order {
		if inline <= budget {
			break
		}
		if it := items[i]; it.kind != "" && !p.alone[i] && !grouped[i] && it.weight > unitCost {
			take(i)
		}
	}
	return p
}

func (f *Rewriter) threshold(binary bool) int64 {
	if binary {
		return f.o.BinaryThreshold
	}
	return f.o.TextThreshold
}

// rewriteResult is Rewrite for a tools/call result: one budget for the
// whole result, content items and structuredContent together.
func (f *Rewriter) rewriteResult(ctx context.Context, c Call, result []byte) ([]byte, []artifact.Artifact, error) {
	mem, ok := members(result)
	if !ok {
		return result, nil, nil
	}
	content, sc, meta := mem.get("content"), mem.get("structuredContent"), mem.get("_meta")
	var items []contentItem
	var bulk Spilled
	spilledContent := false
	if content != nil {
		bulk, spilledContent = f.lit.array(content.val)
	}
	if content != nil && !spilledContent && content.val[0] == '[' {
		for _, e := range jsonrpc.Elements(content.val, [2]int{0, len(content.val)}) {
			items = append(items, f.lit.parseItem(content.val[e[0]:e[1]]))
		}
	}
	over := f.budget.over(f.lit.rawLen(result))
	var scSize int64
	if sc != nil {
		scSize = f.lit.rawLen(sc.val)
	}
	shrinkSC := over && sc != nil && sc.val[0] == '{' && scSize > f.budget.structuredShare()
	p := f.planContent(items, f.budget.forContent(sc != nil && !shrinkSC, scSize), over)
	if len(p.alone) == 0 && len(p.group) == 0 && !shrinkSC && !spilledContent {
		return result, nil, nil
	}
	units := len(p.alone)
	if spilledContent {
		units++
	}
	if len(p.group) > 0 {
		units++
	}
	if shrinkSC {
		units++
	}
	previewBudget := f.budget.perPreview(units)

	rw := &resultWriter{f: f, c: c, previewBudget: previewBudget}
	newItems, err := rw.content(ctx, items, p)
	if err != nil {
		return f.withhold(c, result, rw.stored, err)
	}
	if spilledContent {
		u, count := contentUnit(bulk)
		pub, err := rw.publish(ctx, u, "/content")
		if err != nil {
			return f.withhold(c, result, rw.stored, err)
		}
		if pub != nil {
			rw.replaced[len(rw.replaced)-1].Count = count
			newItems = [][]byte{textItem(pub.text), pub.link("text", "")}
		}
	}
	// addItem appends to content, the items kept as they were if none
	// was replaced.
	addItem := func(it []byte) {
		if newItems == nil {
			for _, old := range items {
				newItems = append(newItems, old.raw)
			}
		}
		newItems = append(newItems, it)
	}
	changed := newItems != nil
	if shrinkSC {
		v, ok := rw.structured(ctx, sc.val)
		switch {
		case rw.err != nil:
			return f.withhold(c, result, rw.stored, rw.err)
		case ok:
			sc.val, changed = v, true
		default:
			// No small value valid for the tool's schema: the result
			// becomes a tool error without structuredContent (clients skip
			// the schema check on errors) and the whole value a link.
			orig := sc.val
			pub, err := rw.publish(ctx, unit{kind: "structured", mime: "application/json", size: scSize, over: true, threshold: f.o.TextThreshold,
				open: func() io.Reader { return f.lit.reader(orig) }}, "/structuredContent")
			if err != nil {
				return f.withhold(c, result, rw.stored, err)
			}
			if pub == nil { // the policy keeps it inline
				break
			}
			changed = true
			mem.remove("structuredContent")
			mem.setOrAdd("isError", []byte("true"))
			addItem(textItem("The tool succeeded, but its structured output (" + humanSize(pub.a.Size) +
				") does not fit this result in a form its output schema accepts, so it is marked as an error. " + pub.sentence))
		}
	}
	if !changed {
		return result, rw.stored, nil // the policy kept everything inline
	}
	if extra := rw.structuredLinks(); extra != "" {
		addItem(textItem(extra))
	}
	if newItems != nil {
		mem.setOrAdd("content", jsonArray(newItems))
	}
	if len(rw.replaced) > 0 {
		m := []byte(`{}`)
		if meta != nil && meta.val[0] == '{' {
			m = meta.val
		}
		list, _ := json.Marshal(rw.replaced)
		m, _ = jsonrpc.SetPath(m, list, MetaReplaced)
		mem.setOrAdd("_meta", m)
	}
	return mem.encode(), rw.stored, nil
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
}

type literalLink struct {
	lit []byte
	pub *published
}

// content returns the rewritten content items, or nil when none changed.
func (w *resultWriter) content(ctx context.Context, items []contentItem, p plan) ([][]byte, error) {
	group := map[int]bool{}
	for _, i := range p.group {
		group[i] = true
	}
	var out [][]byte
	changed, groupKept := false, false
	for i, it := range items {
		switch {
		case p.alone[i]:
			pub, err := w.publish(ctx, w.itemUnit(it), "/content/"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			if pub == nil {
				out = append(out, it.raw)
				continue
			}
			changed = true
			w.byLiteral = append(w.byLiteral, literalLink{it.lit, pub})
			if th := pub.thumbnail(); th != nil {
				out = append(out, th)
			}
			out = append(out, textItem(pub.text), pub.link(it.kind, it.uri))
		case group[i] && i == p.group[0]:
			pub, err := w.publish(ctx, w.f.lit.groupUnit(items, p.group), "/content/"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			if pub == nil {
				groupKept = true
				out = append(out, it.raw)
				continue
			}
			changed = true
			w.replaced[len(w.replaced)-1].Count = len(p.group)
			out = append(out, textItem(pub.text), pub.link("text", ""))
		case group[i]:
			if groupKept {
				out = append(out, it.raw)
			} // else in the group's artifact
		default:
			out = append(out, it.raw)
		}
	}
	if !changed {
		return nil, nil
	}
	return out, nil
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
