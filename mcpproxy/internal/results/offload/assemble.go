package offload

import (
	"encoding/base64"
	"encoding/json"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// MetaReplaced is the result _meta key listing every place of a tools/call
// result the offloader replaced, each with its link: code reading the
// result learns there that what it holds is a preview.
const MetaReplaced = "dev.spillway/replaced"

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

// textItem is a text content item.
func textItem(s string) []byte {
	b, _ := json.Marshal(map[string]string{"type": "text", "text": s})
	return b
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

// jsonArray writes items as a JSON array.
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

// resourceLink is the resource_link of p: its URI, HTTP link, size,
// mime type and hash.
func (p *published) resourceLink() artifact.ResourceLink { return artifact.NewResourceLink(p.a, p.l) }
