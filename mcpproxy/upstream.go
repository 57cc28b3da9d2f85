package mcpproxy

import (
	"log/slog"
	"net/http"

	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/child"
	"github.com/spillway-dev/spillway/mcpproxy/internal/upstreams/httpclient"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
)

// HTTPUpstream is a Streamable HTTP tool server (or a legacy HTTP+SSE
// one). Client, nil or not, is used under the upstream client policy
// (bounded dialing and TLS handshake, no redirect to another origin); it
// must have no overall Timeout: streams may last as long as a tool runs.
type HTTPUpstream struct {
	URL    string
	Client *http.Client
	// Header is added to every upstream request, e.g. the upstream's own
	// Authorization; the client's Authorization is never forwarded.
	Header http.Header
	// OAuth, when set, gets Spillway's own access token from the
	// upstream's authorization server (client credentials), sent as every
	// request's Authorization; Header must then hold no Authorization
	// (New fails). Tokens are kept per upstream until shortly before they
	// expire; an upstream's 401 drops the token.
	OAuth *OAuthClient
	// Transport is "streamable", "sse" (the legacy HTTP+SSE transport of
	// 2024-11-05) or "" to find out: POST first, and the legacy transport
	// only when the upstream refuses an initialize POST.
	Transport string
}

func (*HTTPUpstream) upstream() {}

// clientOptions configure Spillway's own client of the upstream: the
// configured headers on every request, and on a stateless tools/call the
// Mcp-Param-* headers of the tool's bindings.
func (u *HTTPUpstream) clientOptions(maxMessage int64, log *slog.Logger, transport string, tools *mcpheader.Tools) httpclient.Options {
	return httpclient.Options{URL: u.URL, Client: u.Client, Transport: transport, MaxMessage: maxMessage, Logger: log,
		Header: func(m *jsonrpc.Message, h http.Header) {
			for k, vs := range u.Header {
				h[k] = vs
			}
			if m != nil && m.Method == "tools/call" && h.Get(mcpheader.Method) != "" {
				name, _ := mcpheader.RoutingName(m)
				bs, _ := tools.Lookup(name)
				mcpheader.Set(h, m, bs)
			}
		}}
}

// CommandUpstream is a tool server run as a child process speaking stdio.
// The child gets a minimal environment (see the child package) plus Env,
// and a private, empty HOME (removed when it exits) unless Env names HOME.
type CommandUpstream struct {
	Command string   // program
	Args    []string // its arguments
	// Env configures the child's environment beyond the allow-list: NAME
	// passes Spillway's value of NAME, NAME=VALUE sets it.
	Env []string
	Dir string
	// User, when set, runs the child as this user (a name or a numeric
	// uid, with the user's primary group and no supplementary groups):
	// only a separate user keeps a child from Spillway's own files (the
	// signing key) and, unless Spillway is non-dumpable, its memory and
	// environment. Unix only; Spillway needs root or CAP_SETUID and
	// CAP_SETGID. New fails for an unknown user; each start fails without
	// the privilege. "" runs the child as Spillway's user.
	User   string
	Logger *slog.Logger // the child's stderr goes here, at Debug, rate-limited
}

func (*CommandUpstream) upstream() {}

func (u *CommandUpstream) logger(def *slog.Logger) *slog.Logger {
	if u.Logger != nil {
		return u.Logger
	}
	return def
}

// ParseCommand splits a command line on spaces, honouring single and
// double quotes, for --upstream-cmd.
func ParseCommand(s string) (*CommandUpstream, error) {
	c, err := child.ParseCommand(s)
	if err != nil {
		return nil, err
	}
	return &CommandUpstream{Command: c.Path, Args: c.Args}, nil
}
