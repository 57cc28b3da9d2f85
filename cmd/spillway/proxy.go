package main

import (
	"errors"
	"flag"
	"log/slog"
	"net/http"
	"strings"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy"
)

// proxyFlags configure the MCP proxy of `spillway serve`.
type proxyFlags struct {
	upstreamURL    string
	upstreamCmd    string
	upstreamHeader string
	stdio          bool
	allowedHosts   string
	allowedOrigins string
	maxBody        int64
}

func (f *proxyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.upstreamURL, "upstream-url", "", "MCP server to proxy, over Streamable HTTP (`URL`)")
	fs.StringVar(&f.upstreamCmd, "upstream-cmd", "", "MCP server to proxy, run as a stdio child process (`command` line)")
	fs.StringVar(&f.upstreamHeader, "upstream-header", "", "`header`s sent to --upstream-url, as Name: value; Name: value")
	fs.BoolVar(&f.stdio, "stdio", false, "also serve MCP on stdin/stdout (for agents that launch servers); ends when stdin does")
	fs.StringVar(&f.allowedHosts, "allowed-hosts", "", "Host names /mcp accepts besides loopback (`list`, comma-separated; * for any)")
	fs.StringVar(&f.allowedOrigins, "allowed-origins", "", "browser Origins /mcp accepts besides its own (`list`, comma-separated)")
	fs.Int64Var(&f.maxBody, "max-body", 4<<20, "largest request body a client may POST to /mcp, in `bytes`")
}

// build returns the proxy, or nil when no upstream is configured.
func (f *proxyFlags) build(d *deps, tenants *artifact.Tenants, log *slog.Logger) (*mcpproxy.Proxy, error) {
	var up mcpproxy.Upstream
	switch {
	case f.upstreamURL != "" && f.upstreamCmd != "":
		return nil, errors.New("--upstream-url and --upstream-cmd exclude each other")
	case f.upstreamURL != "":
		h := http.Header{}
		for _, kv := range strings.Split(f.upstreamHeader, ";") {
			if k, v, ok := strings.Cut(kv, ":"); ok {
				h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
		}
		up = &mcpproxy.HTTPUpstream{URL: f.upstreamURL, Header: h}
	case f.upstreamCmd != "":
		cu, err := mcpproxy.ParseCommand(f.upstreamCmd)
		if err != nil {
			return nil, errors.New("--upstream-cmd: " + err.Error())
		}
		up = cu
	case f.stdio:
		return nil, errors.New("--stdio needs --upstream-url or --upstream-cmd")
	default:
		return nil, nil
	}
	return mcpproxy.New(mcpproxy.Options{
		Upstream:       up,
		Artifacts:      d.svc,
		Tenants:        tenants,
		AllowedHosts:   splitList(f.allowedHosts),
		AllowedOrigins: splitList(f.allowedOrigins),
		MaxBody:        f.maxBody,
		Logger:         log,
	})
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
