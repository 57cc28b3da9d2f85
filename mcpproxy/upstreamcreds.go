package mcpproxy

import (
	"cmp"
	"errors"
	"net/http"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/httpx"
	"github.com/spillway-dev/spillway/mcpproxy/upstreamauth"
)

// OAuthClient is Spillway's OAuth 2.0 client credentials grant for an
// HTTP upstream (RFC 6749 4.4): see package upstreamauth. Resource ""
// defaults to the upstream's URL (RFC 8707, as the MCP authorization
// spec asks).
type OAuthClient struct {
	TokenURL     string
	ClientID     string
	ClientSecret string
	Scopes       []string
	Resource     string
}

// authorized returns up ready to be dialed: up itself without OAuth,
// else a copy whose Client sends every request with an access token of
// a Source of its own (one cache and one fetch at a time for every
// connection to up, its faces and its probes alike). A configured
// Authorization header beside OAuth is an error: which of the two
// reaches the upstream would be a guess.
func (p *Proxy) authorized(up *HTTPUpstream) (*HTTPUpstream, error) {
	if up.OAuth == nil {
		return up, nil
	}
	if up.Header.Get("Authorization") != "" {
		return nil, errors.New("mcpproxy: an upstream's Authorization header and OAuth exclude each other")
	}
	o := up.OAuth
	src, err := upstreamauth.New(upstreamauth.Config{TokenURL: o.TokenURL, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
		Scopes: o.Scopes, Resource: cmp.Or(o.Resource, up.URL), Logger: p.log.With("upstream", httpx.RedactURL(up.URL))})
	if err != nil {
		return nil, err
	}
	c := &http.Client{}
	if up.Client != nil {
		*c = *up.Client
	}
	c.Transport = src.Transport(c.Transport)
	a := *up
	a.Client = c
	return &a, nil
}
