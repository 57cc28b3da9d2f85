package artifact

import "time"

// MetaSHA256 is the _meta key under which a resource_link carries the
// artifact's SHA-256 (lower-case hex).
const MetaSHA256 = "dev.spillway/sha256"

// MetaTokenID is the _meta key under which a resource_link carries its
// link's token id: what the management API's revoke route names. It is no
// secret (the httpUrl shows it too) and authorises nothing.
const MetaTokenID = "dev.spillway/tokenId"

// MetaLink is the _meta key under which a resource_link mirrors what a
// fetcher needs (LinkMeta): the TypeScript SDKs parse resource_link with
// schemas that drop httpUrl and httpUrlExpiresAt, and keep _meta whole.
const MetaLink = "dev.spillway/link"

// LinkMeta is the value under MetaLink.
type LinkMeta struct {
	HTTPURL          string `json:"httpUrl"`
	HTTPURLExpiresAt string `json:"httpUrlExpiresAt"`
	Size             int64  `json:"size"`
	SHA256           string `json:"sha256"`
	MimeType         string `json:"mimeType,omitempty"`
	// OriginalType and OriginalURI describe the item an offloaded link
	// replaced: its content type (text, image, audio, resource) and, for
	// an embedded resource, its URI.
	OriginalType string `json:"originalType,omitempty"`
	OriginalURI  string `json:"originalUri,omitempty"`
}

// ResourceLink is an MCP resource_link content item carrying the out-of-band
// fields httpUrl and httpUrlExpiresAt (draft SEP "Out-of-Band Resource Access
// via HTTPS URLs").
type ResourceLink struct {
	Type             string `json:"type"` // always "resource_link"
	URI              string `json:"uri"`
	Name             string `json:"name"`
	MimeType         string `json:"mimeType,omitempty"`
	Size             int64  `json:"size"`
	HTTPURL          string `json:"httpUrl"`
	HTTPURLExpiresAt string `json:"httpUrlExpiresAt"` // RFC 3339, UTC
	// Streamable: Spillway serves the artifact through resources/stream
	// (draft SEP-2532) too.
	Streamable bool           `json:"streamable,omitempty"`
	Meta       map[string]any `json:"_meta,omitempty"`
}

// NewResourceLink describes a and its link l as a resource_link item.
func NewResourceLink(a Artifact, l Link) ResourceLink {
	name := a.Name
	if name == "" {
		name = a.ID
	}
	expires := l.Expires.UTC().Format(time.RFC3339)
	meta := map[string]any{MetaSHA256: a.SHA256, MetaLink: LinkMeta{
		HTTPURL: l.URL, HTTPURLExpiresAt: expires, Size: a.Size, SHA256: a.SHA256, MimeType: a.MimeType}}
	if l.TokenID != "" {
		meta[MetaTokenID] = l.TokenID
	}
	return ResourceLink{
		Type:             "resource_link",
		URI:              URI(a.ID),
		Name:             name,
		MimeType:         a.MimeType,
		Size:             a.Size,
		HTTPURL:          l.URL,
		HTTPURLExpiresAt: expires,
		Streamable:       true,
		Meta:             meta,
	}
}
