package offload

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"

	"github.com/spillway-dev/spillway/mcpproxy/internal/results/shrink"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

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

// errSilent is noted's error for a shortened value that cannot say so.
var errSilent = errors.New("offload: the schema refuses the note of a shortened structuredContent")

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
