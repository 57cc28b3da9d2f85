package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// oauthClientYAML is a server's oauth key: Spillway's own client
// credentials grant to the upstream's authorization server.
type oauthClientYAML struct {
	TokenURL     string       `yaml:"token_url"`
	ClientID     string       `yaml:"client_id"`
	ClientSecret headerSource `yaml:"client_secret"`
	Scopes       []string     `yaml:"scopes"`
	Resource     string       `yaml:"resource"`
}

// check validates the oauth key of a server whose headers are hs,
// without reading the secret.
func (o *oauthClientYAML) check(hs map[string]headerSource) error {
	for k := range hs {
		if http.CanonicalHeaderKey(k) == "Authorization" {
			return errors.New("oauth and an Authorization header exclude each other")
		}
	}
	if err := checkTokenURL(o.TokenURL); err != nil {
		return fmt.Errorf("oauth: %w", err)
	}
	if o.ClientID == "" || o.ClientSecret.arg == "" {
		return errors.New("oauth: want client_id and client_secret")
	}
	for _, s := range o.Scopes {
		if s == "" || strings.ContainsAny(s, " \t\"\\") {
			return fmt.Errorf("oauth: scope %.40q: not a scope token", s)
		}
	}
	if o.Resource != "" {
		if u, err := url.Parse(o.Resource); err != nil || !u.IsAbs() || u.Fragment != "" {
			return errors.New("oauth: resource: want an absolute URI without a fragment (RFC 8707)")
		}
	}
	return nil
}

// checkTokenURL refuses a token URL that is not an absolute http(s) URL
// without credentials.
func checkTokenURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("token_url: want an absolute http(s) URL")
	}
	if u.User != nil {
		return errors.New("token_url: credentials go in client_id and client_secret, not in the URL")
	}
	return nil
}

// client is the grant with its secret read. Errors name the secret's
// source, never its value.
func (o *oauthClientYAML) client(getenv func(string) string) (*mcpproxy.OAuthClient, error) {
	secret, err := o.ClientSecret.read(getenv)
	if err != nil {
		return nil, fmt.Errorf("oauth client_secret: %w", err)
	}
	if secret == "" {
		return nil, fmt.Errorf("oauth client_secret: the value from its %s is empty", o.ClientSecret.kind)
	}
	return &mcpproxy.OAuthClient{TokenURL: o.TokenURL, ClientID: o.ClientID, ClientSecret: secret,
		Scopes: o.Scopes, Resource: o.Resource}, nil
}

// upstreamOAuthFlags are the --upstream-oauth-* flags: the oauth key of
// a server, for --upstream-url.
type upstreamOAuthFlags struct {
	tokenURL, clientID, secretFile, scopes, resource string
}

func (o *upstreamOAuthFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&o.tokenURL, "upstream-oauth-token-url", "", "get Spillway's own access token for --upstream-url from this token endpoint `URL` (OAuth client credentials grant)")
	fs.StringVar(&o.clientID, "upstream-oauth-client-id", "", "Spillway's client `id` at --upstream-oauth-token-url")
	fs.StringVar(&o.secretFile, "upstream-oauth-client-secret-file", "", "private `file` holding Spillway's client secret at --upstream-oauth-token-url")
	fs.StringVar(&o.scopes, "upstream-oauth-scopes", "", "`scopes` asked of --upstream-oauth-token-url, comma-separated (default the server's)")
	fs.StringVar(&o.resource, "upstream-oauth-resource", "", "RFC 8707 resource `URI` asked for (default --upstream-url)")
}

// on reports whether any --upstream-oauth-* flag is set.
func (o *upstreamOAuthFlags) on() bool {
	return o.tokenURL != "" || o.clientID != "" || o.secretFile != "" || o.scopes != "" || o.resource != ""
}

// client returns the grant of the flags (nil without them), its secret
// read from its file, for an upstream whose headers are h.
func (o *upstreamOAuthFlags) client(h http.Header) (*mcpproxy.OAuthClient, error) {
	if !o.on() {
		return nil, nil
	}
	switch {
	case h.Get("Authorization") != "":
		return nil, errors.New("--upstream-oauth-* and an --upstream-header Authorization exclude each other")
	case o.tokenURL == "" || o.clientID == "" || o.secretFile == "":
		return nil, errors.New("--upstream-oauth-* need --upstream-oauth-token-url, --upstream-oauth-client-id and --upstream-oauth-client-secret-file")
	}
	y := oauthClientYAML{TokenURL: o.tokenURL, ClientID: o.clientID, ClientSecret: headerSource{kind: "file", arg: o.secretFile},
		Scopes: splitList(o.scopes), Resource: o.resource}
	if err := y.check(nil); err != nil {
		return nil, fmt.Errorf("--upstream-oauth-*: %w", err)
	}
	c, err := y.client(nil)
	if err != nil {
		return nil, fmt.Errorf("--upstream-oauth-client-secret-file: %w", err)
	}
	return c, nil
}
