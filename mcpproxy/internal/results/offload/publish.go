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

// publish asks the policy about u and, unless it keeps u inline (nil, nil),
// stores it, mints its link and records it under ptr (a JSON pointer into
// the result; "" records nothing).
func (w *resultWriter) publish(ctx context.Context, u unit, ptr string) (*published, error) {
	f, c := w.f, w.c
	d, err := f.dec.Offload(ctx, policy.OffloadInput{
		Server: f.o.Server, Tool: c.Tool, Method: c.Method, Kind: u.kind,
		MimeType: u.mime, Size: u.size, Tenant: c.Tenant, Threshold: u.threshold,
		Budget: f.budget.Result, OverBudget: u.over,
	})
	if err != nil || !d.Offload {
		if err != nil {
			f.log.Warn("offload decision failed; keeping the item inline", "err", err)
		}
		return nil, nil
	}
	ttl := f.o.TTL
	if d.TTLSeconds > 0 {
		ttl = time.Duration(d.TTLSeconds) * time.Second
	}
	mime := u.mime
	if mime == "" {
		mime = "application/octet-stream"
	}
	name, source := c.Tool, "tool:"+c.Tool
	if c.Method == "resources/read" {
		name, source = path.Base(c.URI), "resources/read"
	}
	// A name that says what the artifact is, unique in a listing:
	// query-items-3f2abc.json, read_graph-structured-x7k2ab.json.
	id := artifact.NewID()
	fileName := fmt.Sprintf("%s-%s-%s%s", safeName(name), u.label(), id[:6], extension(mime))
	thumb := u.kind == "image" && !f.o.NoThumbnails
	src := u.open()
	if c, ok := src.(io.Closer); ok {
		defer c.Close() // a store that stops early must not leave the source's writer waiting
	}
	st, staged := artifact.StagingOf(src)
	staged = staged && takesStaging(f.svc) // the store takes it as it is, reading none of it
	if !staged {
		src = artifact.ProgressReader(ctx, src) // what the store reads is progress (see StoreStall)
	}
	var pb *preview.Builder
	var beside *aside
	if !thumb {
		pb = u.early.take(mime) // built while the text arrived: the store only copies
	}
	if pb != nil {
		pb.SetBudget(w.previewBudget)
	} else {
		pb = preview.New(preview.Options{MimeType: mime, Name: fileName, Budget: w.previewBudget,
			Thumbnail: thumb, ThumbMax: f.o.ThumbMax, Size: u.size, TempDir: f.o.StageDir})
		if staged {
			// Staged as it arrived, in the store: the preview reads it
			// first, as far as it needs (an image's header, not its
			// gigabyte).
			pb.Feed(st, st.Size())
		} else {
			beside = newAside(pb) // the preview is built beside the store's write and hash
			src = io.TeeReader(src, beside)
		}
	}
	defer pb.Close() // an image to thumbnail waits in a file: freed at once if the store fails
	endStoring := storing(ctx)
	a, l, err := f.svc.Publish(ctx, artifact.Artifact{
		ID:       id,
		Name:     fileName,
		MimeType: mime,
		Tenant:   c.Tenant,
		Source:   source,
	}, src, artifact.LinkOptions{TTL: ttl, Tenant: c.Tenant, Audience: d.Audience, Source: "offload"})
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
	pv := previewWhileCalled(ctx, pb)
	p := &published{a: a, l: l, thumb: pv.Thumbnail, body: pv.Text,
		sentence: sentence(a.Size, mime, l.URL, l.Expires, artifact.URI(a.ID))}
	if p.body != "" && !strings.HasSuffix(p.body, "\n") {
		p.body += "\n"
	}
	p.text = p.body + p.sentence
	w.stored = append(w.stored, a)
	if ptr != "" {
		w.replaced = append(w.replaced, newReplaced(ptr, p))
	}
	return p, nil
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
