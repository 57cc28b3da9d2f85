package offload

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/preview"
	"github.com/spillway-dev/spillway/policy"
)

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
	early     *early // its preview, built as it arrived, if it was
}

// label is what the unit was, for its artifact's name.
func (u unit) label() string {
	if u.group {
		return "items"
	}
	return u.kind
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

// published is a unit stored, with its link and what the agent is shown.
type published struct {
	a        artifact.Artifact
	l        artifact.Link
	body     string // what the preview says of the bytes
	sentence string // where they are and how to get them
	text     string // body and sentence: the text item's text
	thumb    *preview.Image
}

// thumbnail is the image content item showing an offloaded image small,
// nil when there is none.
func (p *published) thumbnail() []byte {
	if p.thumb == nil {
		return nil
	}
	b, _ := json.Marshal(map[string]string{"type": "image", "mimeType": p.thumb.MimeType,
		"data": base64.StdEncoding.EncodeToString(p.thumb.Data)})
	return b
}

func (p *published) resourceLink() artifact.ResourceLink { return artifact.NewResourceLink(p.a, p.l) }

// link is the resource_link item that replaces a content item of type
// typ (with uri, an embedded resource's).
func (p *published) link(typ, uri string) []byte {
	rl := p.resourceLink()
	m := rl.Meta[artifact.MetaLink].(artifact.LinkMeta)
	m.OriginalType, m.OriginalURI = typ, uri
	rl.Meta[artifact.MetaLink] = m
	b, _ := json.Marshal(rl)
	return b
}

// publish asks the policy about u and, unless it keeps u inline (nil,
// nil), stores it, mints its link, builds its preview and records it
// under ptr (a JSON pointer into the result; "" records nothing). The
// error is a failed store, wrapping ErrStalled when the stall watch
// stopped it; a failed decision keeps u inline instead.
func (w *resultWriter) publish(ctx context.Context, u unit, ptr string) (*published, error) {
	d, ok := w.decide(ctx, u)
	if !ok {
		return nil, nil
	}
	meta := w.artifactFor(u)
	src := u.open()
	if c, ok := src.(io.Closer); ok {
		defer c.Close() // a store that stops early must not leave the source's writer waiting
	}
	src, pb, beside := w.previewBeside(ctx, u, meta, src)
	defer pb.Close() // an image to thumbnail waits in a file: freed at once if the store fails
	endStoring := storing(ctx)
	a, l, err := w.f.svc.Publish(ctx, meta, src, artifact.LinkOptions{TTL: w.ttl(d), Tenant: w.c.Tenant, Audience: d.Audience, Source: "offload"})
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
	p := newPublished(ctx, a, l, meta.MimeType, pb)
	w.stored = append(w.stored, a)
	if ptr != "" {
		w.replaced = append(w.replaced, newReplaced(ptr, p))
	}
	return p, nil
}

// decide asks the policy whether u leaves the result; false keeps it
// inline, as a failed decision does.
func (w *resultWriter) decide(ctx context.Context, u unit) (policy.OffloadDecision, bool) {
	f, c := w.f, w.c
	d, err := f.dec.Offload(ctx, policy.OffloadInput{
		Server: f.o.Server, Tool: c.Tool, Method: c.Method, Kind: u.kind,
		MimeType: u.mime, Size: u.size, Tenant: c.Tenant, Threshold: u.threshold,
		Budget: f.budget.Result, OverBudget: u.over,
	})
	if err != nil {
		f.log.Warn("offload decision failed; keeping the item inline", "err", err)
		return d, false
	}
	return d, d.Offload
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

// newPublished is a stored as mime, with its link l and pb's preview.
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

// callKey is the context key of the call's own context, which the
// store's work outlives (Rewrite).
type callKey struct{}

// withCall keeps ctx as its call's context in the context it returns.
func withCall(ctx context.Context) context.Context { return context.WithValue(ctx, callKey{}, ctx) }

// previewWhileCalled builds pb's preview while both ctx (the store's
// watch) and the call's own context last: a thumbnail is for the
// client alone, and drawing one takes memory and CPU that the client's
// leaving should give back at once.
func previewWhileCalled(ctx context.Context, pb *preview.Builder) preview.Preview {
	if call, ok := ctx.Value(callKey{}).(context.Context); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(call, cancel)()
	}
	return pb.PreviewContext(ctx)
}

// takesStaging reports whether svc's store takes a staging as it is
// (artifact.Stager) rather than reading it like any source.
func takesStaging(svc *artifact.Service) bool {
	_, ok := svc.Store.(artifact.Stager)
	return ok
}

// base64Decoder decodes standard base64, the encoding MCP gives binary
// data.
func base64Decoder(r io.Reader) io.Reader { return base64.NewDecoder(base64.StdEncoding, r) }

// aside hands what is written to w on a goroutine of its own, a few
// chunks ahead (bounded: asideChunks of what it is given at a time), so
// that a large unit's preview is built beside the store's write and hash
// rather than after each chunk of it. Its asideChunks+1 buffers are
// reused: a Write waits for one while w is behind, and allocates nothing
// once they have grown. Close waits for w to have everything. Write never
// fails; w's own errors are w's to keep.
type aside struct {
	ch   chan []byte
	free chan []byte
	done chan struct{}
}

const (
	asideChunks = 4
	asideChunk  = 64 << 10 // a buffer's least size: what a reader gives at a time
)

func newAside(w io.Writer) *aside {
	a := &aside{ch: make(chan []byte, asideChunks), free: make(chan []byte, asideChunks+1), done: make(chan struct{})}
	for range asideChunks + 1 {
		a.free <- nil // made on first use
	}
	go func() {
		defer close(a.done)
		for b := range a.ch {
			w.Write(b)
			a.free <- b[:0] // never blocks: there are only so many
		}
	}()
	return a
}

func (a *aside) Write(p []byte) (int, error) {
	b := <-a.free
	if cap(b) < len(p) {
		b = make([]byte, 0, max(len(p), asideChunk))
	}
	a.ch <- append(b, p...)
	return len(p), nil
}

// Close ends the stream and waits for w to have it all.
func (a *aside) Close() {
	close(a.ch)
	<-a.done
}
