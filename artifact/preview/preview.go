// Package preview turns the bytes of a tool result, fed as they stream,
// into what a model should see in place of the whole: a dense factual
// text within a byte budget, the facts behind it for programs, and for
// images a small thumbnail.
//
// It knows nothing of MCP: the proxy's offloading and the upload API call
// it alike. A [Builder] is written to like an [io.Writer] and asked for
// its [Preview] once at the end. Whatever the size of the input, a
// Builder keeps a bounded sample (see [New] for the bounds); its result
// does not depend on how the bytes were split into writes.
//
// The input is untrusted: every parser here is incremental, bounded in
// depth and memory, and fuzzed.
package preview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Kinds of content a Preview describes ([Preview.Kind]).
const (
	KindEmpty    = "empty"
	KindJSON     = "json"   // one JSON value: an array or an object
	KindNDJSON   = "ndjson" // a sequence of JSON values, one per line
	KindCSV      = "csv"    // delimited text: comma, semicolon or pipe
	KindTSV      = "tsv"    // tab-separated text
	KindText     = "text"   // plain text and logs
	KindMarkdown = "markdown"
	KindHTML     = "html"
	KindImage    = "image"
	KindAudio    = "audio"
	KindBinary   = "binary"
)

// Defaults and bounds.
const (
	DefaultBudget   = 2048
	DefaultThumbMax = 512

	// sniffSize is how many leading bytes decide the kind: the head is
	// buffered until then, and is the only part that is kept whole.
	sniffSize = 64 << 10
	// maxImageBytes bounds the encoded image kept (on disk, in
	// Options.TempDir) to draw a thumbnail, and maxDrawCost what
	// decoding and drawing it may take. Past either a preview states the
	// dimensions only.
	maxImageBytes = 32 << 20
)

// ErrFinished is returned by [Builder.Write] after [Builder.Preview].
var ErrFinished = errors.New("preview: write after Preview")

// Options configure a Builder. The zero value previews within
// DefaultBudget bytes with no thumbnail.
type Options struct {
	// MimeType and Name are what the producer declared. They are hints:
	// content decides (a CSV declared text/plain is previewed as a table).
	MimeType string
	Name     string
	// Budget is the most bytes of Text; 0 means DefaultBudget. Values
	// under 64 are raised to 64.
	Budget int
	// Thumbnail asks for a downscaled copy of an image.
	Thumbnail bool
	// ThumbMax is the thumbnail's longest side in pixels; 0 means
	// DefaultThumbMax.
	ThumbMax int
	// Size is the content's size when the caller knows it in advance, 0
	// if not: an image too large to draw is then not kept while it
	// streams past.
	Size int64
	// TempDir is where an image to thumbnail is kept while it arrives,
	// in a file unlinked at once ("": os.TempDir()). Without room there
	// it is not thumbnailed.
	TempDir string

	// nested is set for the preview of a compressed file's content: its
	// own content is not decompressed in turn (a gzip quine would never
	// end).
	nested bool
}

// Preview is what a Builder found.
type Preview struct {
	// Kind is one of the Kind constants.
	Kind string
	// Text describes the content for a model, within Options.Budget bytes.
	// It holds no link: the caller adds how to fetch the whole.
	Text string
	// Thumbnail is a small PNG or JPEG of an image, nil when there is none
	// (not asked for, not an image, too large to decode, undecodable, or
	// its context ended before it was drawn).
	Thumbnail *Image
	// Facts are the figures behind Text, for programs.
	Facts Facts
}

// Image is an encoded picture.
type Image struct {
	MimeType      string
	Data          []byte
	Width, Height int
}

// Facts are the figures a preview states. Fields that do not apply to
// the kind are zero.
type Facts struct {
	Size   int64  // bytes written
	Format string // a finer type: "png", "pdf", "wav", "gzip", "log"...
	// Tabular content: a JSON array, NDJSON, CSV/TSV, or the array that
	// holds the bytes of a JSON object (at Path, e.g.
	// "data.statements[0].rows").
	Path    string
	Rows    int64
	Columns []Column
	// Scalars are a JSON object's scalar members on the way to the bulk,
	// in document order, as JSON text.
	Scalars []Scalar
	Tree    *Tree
	// Text.
	Lines  int64
	Levels map[string]int64
	Title  string
	// Images and audio.
	Width, Height int
	Channels      int
	SampleRate    int
	Seconds       float64
	// Malformed says where parsing stopped, if it did.
	Malformed string
}

// Column summarises one field of tabular content.
type Column struct {
	Name string
	// Type is the field's type: "int", "number", "string", "bool",
	// "date", "datetime", "object", "array", "null", or several joined by
	// "|" in order of frequency.
	Type    string
	Missing int64 // rows without the field (JSON only)
	Nulls   int64 // null or empty values
	// Min, Max and Mean cover the numeric values, when HasNum.
	HasNum         bool
	Min, Max, Mean float64
	// MinText and MaxText are the range of date/time values.
	MinText, MaxText string
	// Distinct counts distinct non-null values, exactly when
	// DistinctExact, else estimated.
	Distinct      int64
	DistinctExact bool
	// Top lists every value with its count when there are few.
	Top []ValueCount
}

// ValueCount is a value and how many rows hold it.
type ValueCount struct {
	Value string
	Count int64
}

// Scalar is a scalar member of a JSON object: its path and JSON text.
type Scalar struct {
	Path, Value string
}

// Tree describes nested `children` arrays: objects in them are nodes.
// A node with no children is a leaf. The top level is the root's
// children, or the roots when there are several.
type Tree struct {
	Nodes, Leaves int64
	Depth         int
	TopNames      []string // the first 30 names ("name" or "path" members)
	TopSizes      []int64  // nodes under each of TopNames, itself included
}

// analyzer is one kind's incremental parser.
type analyzer interface {
	write(p []byte)
	// finish renders the sections of the text and fills the facts.
	finish(pv *Preview) []section
}

// ctxFinisher is an analyzer whose finish waits or works long enough to
// heed a context (an image's, drawing its thumbnail).
type ctxFinisher interface {
	finishContext(ctx context.Context, pv *Preview) []section
}

// Builder builds a Preview from bytes written to it. Its zero value is not
// usable: call New. A Builder is not safe for concurrent use.
type Builder struct {
	o    Options
	head []byte // the first sniffSize bytes
	size int64
	an   analyzer
	kind string
	done bool
	pv   Preview // the result, once done
}

// New returns a Builder. Whatever the input size, it keeps the first 64
// KiB, a fixed number of sample rows and lines of at most 1 KiB each, 512
// recorded JSON paths, and per column at most 256 distinct values of 64
// bytes (columns: 64 per table; tables: 4 arrays and 3 maps per JSON
// document): about 3 MiB live with every bound reached
// (TestMemoryWorstCase), 0.3 MiB for ordinary rows. An image keeps at
// most 1 MiB of its head in memory; one to thumbnail is kept whole up to
// 32 MiB on disk instead (Options.TempDir), read back 32 KiB at a time
// (TestLargeImageNotHeld), and decoded if its header says decoding and
// drawing take at most 64 MiB (16 Mpx of 8-bit RGBA, 43 Mpx of a
// baseline 4:2:0 JPEG, 8.5 Mpx of a progressive one); the thumbnails
// drawn at once take at most 64 MiB together, process-wide.
// A gzip's content is inflated from its head at the end, at most 256
// KiB of it, and previewed in turn (not a gzip inside it).
func New(o Options) *Builder {
	if o.Budget == 0 {
		o.Budget = DefaultBudget
	}
	o.Budget = max(o.Budget, 64)
	if o.ThumbMax <= 0 {
		o.ThumbMax = DefaultThumbMax
	}
	return &Builder{o: o}
}

// Write feeds the next bytes. It never fails before Preview is called and
// always consumes all of p; after Preview it returns ErrFinished.
func (b *Builder) Write(p []byte) (int, error) {
	if b.done {
		return 0, ErrFinished
	}
	n := len(p)
	b.size += int64(n)
	if b.an == nil {
		room := sniffSize - len(b.head)
		if len(p) < room {
			b.head = append(b.head, p...)
			return n, nil
		}
		b.head = append(b.head, p[:room]...)
		p = p[room:]
		b.start(false)
	}
	b.an.write(p)
	return n, nil
}

var _ io.Writer = (*Builder)(nil)

// sated is implemented by an analyzer that can tell when the rest of its
// input cannot change what it renders.
type sated interface{ sated() bool }

// Feed writes the first n bytes of r to b in steps, as Write would, but
// stops reading once nothing in the rest can change the preview but its
// size (a binary read past its head, an image too large to draw read past
// its header): the rest is counted, not read. It returns r's error, if
// any.
func (b *Builder) Feed(r io.ReaderAt, n int64) error {
	const step = 256 << 10
	buf := make([]byte, min(n, step))
	for off := int64(0); off < n; {
		if s, ok := b.an.(sated); ok && s.sated() && !b.done {
			b.size += n - off
			return nil
		}
		m, err := r.ReadAt(buf[:min(n-off, step)], off)
		b.Write(buf[:m])
		off += int64(m)
		if off < n && (err != nil || m == 0) {
			if err == nil {
				err = io.ErrNoProgress
			}
			return err
		}
	}
	return nil
}

// start picks the analyzer from the head and feeds it the head.
func (b *Builder) start(complete bool) {
	b.kind, b.an = sniff(b.head, complete, b.o)
	head := b.head
	if b.kind != KindBinary && b.kind != KindImage && b.kind != KindAudio {
		// A text's byte order mark is no part of its first value, key
		// or column name. The head is written whole, so this does not
		// depend on chunking.
		head = bytes.TrimPrefix(head, []byte(bom))
	}
	b.an.write(head)
}

// Close frees at once what b holds for its preview, for a caller that
// will not ask for it: an image to thumbnail waits in a file until
// Preview (a Builder neither previewed nor closed frees it when it is
// collected). b is not to be written to or previewed after. Close after
// Preview does nothing; it never fails.
func (b *Builder) Close() error {
	if c, ok := b.an.(io.Closer); ok {
		c.Close()
	}
	return nil
}

var _ io.Closer = (*Builder)(nil)

// SetBudget sets Options.Budget (as New does: 0 means DefaultBudget,
// values under 64 are raised to 64), for a caller that knows how much
// room the preview has only once the bytes are in: the budget shapes the
// Text alone, not what is analysed. It has no effect after Preview.
func (b *Builder) SetBudget(n int) {
	if n == 0 {
		n = DefaultBudget
	}
	b.o.Budget = max(n, 64)
}

// Preview returns the preview of the bytes written, after the last
// Write; later calls return the same preview. An image's thumbnail waits
// for its turn to be drawn as long as it takes: see PreviewContext.
func (b *Builder) Preview() Preview { return b.PreviewContext(context.Background()) }

// PreviewContext is Preview for a caller whose interest may end. An
// image's thumbnail waits for its turn to be drawn (the process draws 64
// MiB of decoded images at a time) only while ctx lasts, and its decoding
// stops soon after ctx ends; the preview then has no thumbnail and says
// so. Later calls return the same preview, whatever their ctx.
func (b *Builder) PreviewContext(ctx context.Context) Preview {
	if b.done {
		return b.pv
	}
	pv, secs := b.sectionsContext(ctx)
	pv.Text = fit(secs, b.o.Budget)
	b.pv = pv
	return pv
}

// sections ends the Builder as Preview does, returning the preview
// without its Text and the sections it is cut from.
func (b *Builder) sections() (Preview, []section) { return b.sectionsContext(context.Background()) }

// sectionsContext is sections as PreviewContext ends the Builder.
func (b *Builder) sectionsContext(ctx context.Context) (Preview, []section) {
	if b.an == nil {
		b.start(true)
	}
	b.done = true
	pv := Preview{Kind: b.kind}
	pv.Facts.Size = b.size
	if cf, ok := b.an.(ctxFinisher); ok {
		return pv, cf.finishContext(ctx, &pv)
	}
	return pv, b.an.finish(&pv)
}

// section is a part of the text; when the whole does not fit the budget,
// sections of least prio go first.
type section struct {
	prio int
	text string
}

// Section priorities, most important last.
const (
	prioExtra  = 10 // more sample rows, more lines
	prioSample = 30 // one sample row, first lines
	prioDetail = 50 // per-column detail, outlines
	prioFacts  = 80 // the figures
	prioHead   = 100
)

// fit joins sections in order, dropping the least important ones (the
// later first among equals) until the text fits budget bytes, then cuts.
func fit(secs []section, budget int) string {
	total := 0
	for _, s := range secs {
		total += len(s.text)
	}
	keep := make([]bool, len(secs))
	for i := range keep {
		keep[i] = true
	}
	for total > budget {
		drop := -1
		for i, s := range secs {
			if keep[i] && s.prio < prioHead && (drop < 0 || s.prio <= secs[drop].prio) {
				drop = i
			}
		}
		if drop < 0 {
			break
		}
		keep[drop] = false
		total -= len(secs[drop].text)
	}
	var sb strings.Builder
	for i, s := range secs {
		if keep[i] {
			sb.WriteString(s.text)
		}
	}
	out := strings.TrimRight(sb.String(), "\n")
	if len(out) > budget {
		out = truncUTF8(out, budget-len("…")) + "…"
	}
	return out
}

// truncUTF8 cuts s to at most n bytes without splitting a character.
func truncUTF8[T ~string | ~[]byte](s T, n int) T {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return s[:0]
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// clip cuts s to n bytes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return truncUTF8(s, n-len("…")) + "…"
}

// appendClip appends s to dst as clip(s, n) returns it.
func appendClip[T ~string | ~[]byte](dst []byte, s T, n int) []byte {
	if len(s) <= n {
		return append(dst, s...)
	}
	return append(append(dst, truncUTF8(s, n-len("…"))...), "…"...)
}

// HumanSize writes a byte count as previews do ("2.5 MiB"), for callers
// that add to a preview's text.
func HumanSize(n int64) string { return humanSize(n) }

func humanSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
