package offload

import (
	"io"
	"sort"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// Budget says how much of a tools/call result stays inline and how that
// room is shared out. New makes it from Options, and each split of the
// result's room is one of its methods, so that a reader finds them all
// in one place. The zero value keeps nothing inline.
type Budget struct {
	// Result is Options.Budget: the most the agent receives inline of
	// content and structuredContent together, previews and links
	// included.
	Result int64
	// Previews is Options.PreviewBudget: the preview text that all the
	// parts offloaded from one result share.
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
// offloaded, and it is withheld instead of passed inline when a store
// fails.
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

// perPreview is the preview text each offloaded part gets when parts
// of them share Previews: an equal share, at least minPreview.
func (b Budget) perPreview(parts int) int { return max(minPreview, b.Previews/max(parts, 1)) }

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

// parseItem reads a content item, it: its kind, payload literal, mime
// type and sizes.
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

// contentPlan says which content items leave a result: chosen alone, or
// grouped into one artifact.
type contentPlan struct {
	alone map[int]bool
	group []int // indexes, in order; empty: no group
}

// unitCost is about what one offloaded unit adds back to a result: its
// preview (at its smallest) and its resource_link. Offloading an item
// that weighs less than this would make the result larger.
const unitCost = 1024

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

// newPlanner starts a plan that keeps every item of items.
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

// threshold is the size over which an item of its kind leaves even a
// result within its budget: Options.BinaryThreshold or TextThreshold.
func (f *Rewriter) threshold(binary bool) int64 {
	if binary {
		return f.o.BinaryThreshold
	}
	return f.o.TextThreshold
}

// resourceUnit is what leaves of a resources/read item, it: its text or
// blob, when over its kind's threshold; false when the item stays.
func (f *Rewriter) resourceUnit(it []byte) (unit, bool) {
	if len(it) == 0 || it[0] != '{' {
		return unit{}, false
	}
	lit, binary := pick(it)
	if len(lit) < 2 || lit[0] != '"' {
		return unit{}, false
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
		return unit{}, false
	}
	if !binary {
		if _, spilled := f.lit.spilled(lit); !spilled {
			u.size, _ = io.Copy(io.Discard, newStringReader(lit)) // exact, without a copy
		}
		if u.size <= u.threshold {
			return unit{}, false
		}
		if u.mime == "" {
			u.mime = sniffText(f.lit.open(lit))
		}
	}
	return u, true
}
