// Package mcptool helps MCP tool servers built with the official Go SDK
// return large results as links: it uploads the bytes to Spillway and
// returns a resource_link content item that carries httpUrl and
// httpUrlExpiresAt (draft SEP "Out-of-Band Resource Access via HTTPS
// URLs").
//
//	link, err := mcptool.Upload(ctx, client, bytes.NewReader(png), sdk.UploadOptions{Name: "chart.png", MimeType: "image/png"})
//	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "chart attached"}, link}}, nil
//
// The SDK's own mcp.ResourceLink has no fields for the two out-of-band
// properties, and its Content interface cannot be implemented outside the
// SDK. Link embeds *mcp.ResourceLink (so it is an mcp.Content) and
// overrides MarshalJSON to add them.
package mcptool

import (
	"context"
	"encoding/json"
	"io"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/spillway-dev/spillway/sdk"
)

// Link is a resource_link content item with httpUrl and httpUrlExpiresAt.
type Link struct {
	*mcp.ResourceLink
	HTTPURL   string
	ExpiresAt time.Time
}

var _ mcp.Content = (*Link)(nil)

// MarshalJSON writes the SDK's resource_link plus the out-of-band fields.
func (l *Link) MarshalJSON() ([]byte, error) {
	b, err := l.ResourceLink.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["httpUrl"], _ = json.Marshal(l.HTTPURL)
	m["httpUrlExpiresAt"], _ = json.Marshal(l.ExpiresAt.UTC().Format(time.RFC3339))
	return json.Marshal(m)
}

// FromLink turns a link the service returned into a content item, its
// SHA-256 and token id kept in _meta.
func FromLink(l sdk.Link) *Link {
	size := l.Size
	rl := &mcp.ResourceLink{URI: l.URI, Name: l.Name, MIMEType: l.MimeType, Size: &size}
	rl.Meta = mcp.Meta{}
	if l.SHA256 != "" {
		rl.Meta[sdk.MetaSHA256] = l.SHA256
	}
	if l.TokenID != "" { // what the tool's owner revokes the link by
		rl.Meta[sdk.MetaTokenID] = l.TokenID
	}
	if len(rl.Meta) == 0 {
		rl.Meta = nil
	}
	return &Link{ResourceLink: rl, HTTPURL: l.HTTPURL, ExpiresAt: l.ExpiresAt}
}

// Upload stores r with c and returns the content item linking to it.
func Upload(ctx context.Context, c *sdk.Client, r io.Reader, o sdk.UploadOptions) (*Link, error) {
	l, err := c.Upload(ctx, r, o)
	if err != nil {
		return nil, err
	}
	return FromLink(l), nil
}
