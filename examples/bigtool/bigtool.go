// Package bigtool is a demo MCP tool server whose tools return the large
// outputs Spillway exists for: a multi-megabyte JSON query result (with a
// small structuredContent summary), a generated PNG chart, a CSV export, a
// slow report that streams progress, and one tiny result that must never be
// offloaded. Every output is deterministic for a given seed argument, so
// tests can compare checksums across transports and processes.
//
// The command in ./cmd/bigtool serves it over stdio or Streamable HTTP;
// tests may serve it in-process with [NewServer] and [NewHandler].
package bigtool

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure NewServer. A nil *Options is the same as the zero value.
type Options struct {
	// Logger receives the SDK's diagnostics. Nil discards them.
	Logger *slog.Logger
}

// NewServer returns an MCP server with bigtool's tools registered. Connect
// it to any transport; it is safe for concurrent use by many sessions.
func NewServer(opts *Options) *mcp.Server {
	if opts == nil {
		opts = &Options{}
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "bigtool", Title: "Spillway demo tool server", Version: "1.0.0"},
		&mcp.ServerOptions{
			Logger: opts.Logger,
			Instructions: "bigtool returns large outputs on purpose: query (~5 MB JSON), chart (~1.5 MB PNG), " +
				"export_csv (~2 MB CSV), slow_report (progress, then ~1 MB text) and small (a few bytes).",
		})
	addTools(s)
	return s
}

// Era selects which revisions of the Streamable HTTP transport NewHandler
// serves.
type Era string

const (
	// EraBoth serves both eras on one endpoint: requests announcing
	// protocol 2026-07-28 or later in their MCP-Protocol-Version header go
	// to a stateless handler; everything else (initialize, requests with an
	// Mcp-Session-Id, GET and DELETE) goes to a session handler. This is
	// what a real server upgraded in place looks like to a proxy.
	EraBoth Era = "both"
	// EraSession serves the session era only (revisions 2025-06-18 and
	// 2025-11-25): initialize, Mcp-Session-Id, GET stream, DELETE, and
	// Last-Event-ID replay of dropped SSE streams. New-era requests are
	// refused with the SDK's unsupported-protocol-version error, so clients
	// fall back to initialize.
	EraSession Era = "session"
	// EraStateless serves the stateless era (revision 2026-07-28:
	// server/discover, per-request _meta) and answers older clients without
	// creating sessions, like the SDK's conformance everything-server.
	EraStateless Era = "stateless"
)

// ParseEra parses an -era flag value.
func ParseEra(s string) (Era, error) {
	switch e := Era(s); e {
	case EraBoth, EraSession, EraStateless:
		return e, nil
	}
	return "", fmt.Errorf("era %q: want both, session or stateless", s)
}

// firstStatelessVersion is the first protocol revision without sessions;
// revision strings are dates, so they compare as strings.
const firstStatelessVersion = "2026-07-28"

// NewHandler serves s over Streamable HTTP in the given era; mount it at
// /mcp. Session-era streams are kept in a 64 MiB in-memory event store so a
// client that loses an SSE stream mid-result can resume it with
// Last-Event-ID. Idle sessions are closed after 30 minutes.
func NewHandler(s *mcp.Server, era Era) (http.Handler, error) {
	if _, err := ParseEra(string(era)); err != nil {
		return nil, err
	}
	getServer := func(*http.Request) *mcp.Server { return s }
	stateless := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{Stateless: true})
	if era == EraStateless {
		return stateless, nil
	}
	events := mcp.NewMemoryEventStore(nil)
	events.SetMaxBytes(64 << 20)
	session := mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
		EventStore:     events,
		SessionTimeout: 30 * time.Minute,
	})
	if era == EraSession {
		return session, nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" &&
			r.Header.Get("Mcp-Protocol-Version") >= firstStatelessVersion {
			stateless.ServeHTTP(w, r)
			return
		}
		session.ServeHTTP(w, r)
	}), nil
}
