package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/gorilla/mux"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/api"
	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/artifact/token"
	"github.com/spillway-dev/spillway/mcpproxy"
)

// serveConfig is everything `spillway serve` is told.
type serveConfig struct {
	storeFlags
	listen         string
	insecureNoAuth bool
	redirect       bool
	sweepEvery     time.Duration
	authTokens     string
	authTokensFile string
	maxUpload      int64
	proxyFlags
}

func (c *serveConfig) register(fs *flag.FlagSet) {
	c.storeFlags.register(fs)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "`address` to listen on; a non-loopback address needs inbound auth")
	fs.BoolVar(&c.insecureNoAuth, "insecure-no-auth", false, "allow a non-loopback --listen without inbound auth tokens")
	fs.BoolVar(&c.redirect, "redirect", false, "answer fetches with a 302 to a storage URL presigned for 60s (S3 stores)")
	fs.DurationVar(&c.sweepEvery, "sweep-every", time.Minute, "how often expired artifacts are deleted")
	fs.StringVar(&c.authTokens, "auth-tokens", "", "inbound bearer `tokens` for /mcp and /v1/artifacts, as token=tenant,... (the tenant follows the last =)")
	fs.StringVar(&c.authTokensFile, "auth-tokens-file", "", "`file` of inbound bearer tokens, one token=tenant per line, # comments; mode 600 (instead of --auth-tokens)")
	fs.Int64Var(&c.maxUpload, "max-upload", 1<<30, "largest upload to /v1/artifacts, in `bytes`")
	c.proxyFlags.register(fs)
}

func serveMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c serveConfig
	c.register(fs)
	if err := parseLayered(fs, args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "spillway serve:", err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "spillway serve: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	log, err := c.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, "spillway serve:", err)
		return 2
	}
	if c.stdio && c.decisionLog == "-" {
		fmt.Fprintln(stderr, "spillway serve: --stdio owns stdout; write the decision log to a file")
		return 2
	}
	s, err := newServer(ctx, &c, log, stdout)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	if c.stdio {
		// The client launched us: its end of input ends the server.
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() {
			if err := s.proxy.ServeStdio(sctx, stdin, stdout); err != nil && sctx.Err() == nil {
				log.Error("stdio face failed", "err", err)
			}
			cancel()
		}()
		ctx = sctx
	}
	if err := s.Run(ctx); err != nil {
		log.Error("server failed", "err", err)
		return 1
	}
	return 0
}

// server is a running `spillway serve`: tests build one with newServer and
// an address of 127.0.0.1:0.
type server struct {
	cfg   *serveConfig
	log   *slog.Logger
	deps  *deps
	ln    net.Listener
	http  *http.Server
	proxy *mcpproxy.Proxy // nil without an upstream
}

func newServer(ctx context.Context, c *serveConfig, log *slog.Logger, stdout io.Writer) (*server, error) {
	tenants, err := c.tenants()
	if err != nil {
		return nil, err
	}
	if err := checkExposure(c, tenants.Required()); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return nil, err
	}
	d, err := c.open(ctx, log, stdout, "http://"+ln.Addr().String())
	if err != nil {
		ln.Close()
		return nil, err
	}
	s := &server{cfg: c, log: log, deps: d, ln: ln}
	r := mux.NewRouter()
	fetch := artifact.NewHandler(d.svc, artifact.HandlerOptions{
		Policy:   d.engine,
		Logger:   log,
		Redirect: c.redirect,
	})
	fetch.Register(r)
	api.New(d.svc, api.Options{Tenants: tenants, MaxUpload: c.maxUpload, Logger: log}).Register(r)
	if s.proxy, err = c.proxyFlags.build(d, tenants, fetch, log); err != nil {
		d.Close()
		ln.Close()
		return nil, err
	}
	if s.proxy != nil {
		r.Handle("/mcp", s.proxy)
	}
	r.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	}).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/readyz", s.readyz).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/metrics", s.metrics).Methods(http.MethodGet)
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		artifact.WriteError(w, fmt.Errorf("no route %s: %w", r.URL.Path, artifact.ErrNotFound))
	})
	s.http = &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// No WriteTimeout: fetches and MCP streams may legitimately run long.
	}
	return s, nil
}

// Addr is the address the server listens on.
func (s *server) Addr() string { return s.ln.Addr().String() }

// Run serves until ctx is done, then shuts down gracefully.
func (s *server) Run(ctx context.Context) error {
	defer s.deps.Close()
	if s.proxy != nil {
		defer s.proxy.Close()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.deps.svc.RunSweeper(ctx, s.cfg.sweepEvery, s.log)
	go s.deps.engine.Watch(ctx)
	if s.deps.keyFile != "" {
		// Keys retired from the file stop verifying within a second.
		go token.WatchKeyFile(ctx, s.deps.keyFile, s.deps.svc.Signer, 0, s.log)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.http.Serve(s.ln) }()
	s.log.Info("spillway listening", "addr", "http://"+s.Addr(), "public_url", s.deps.svc.PublicURL.String(),
		"version", versionString(), "policy_revision", s.deps.engine.Revision())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down")
	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer scancel()
	if err := s.http.Shutdown(sctx); err != nil {
		s.http.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	checks := map[string]string{"store": "ok", "policy": "ok"}
	status := http.StatusOK
	if err := s.deps.svc.Store.Ping(ctx); err != nil {
		checks["store"], status = err.Error(), http.StatusServiceUnavailable
	}
	if err := s.deps.engine.Ready(); err != nil {
		checks["policy"], status = err.Error(), http.StatusServiceUnavailable
	}
	// A refused policy reload leaves the last good policy serving: the
	// replica stays ready, and says what was refused.
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"ready": status == http.StatusOK, "checks": checks,
		"policy_revision": s.deps.engine.Revision(), "policy": s.deps.engine.Status()})
}

func (s *server) metrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.deps.svc.Metrics.WritePrometheus(w)
	s.deps.engine.WriteMetrics(w)
}

// tenants reads the inbound tokens from --auth-tokens or --auth-tokens-file.
func (c *serveConfig) tenants() (*identity.Tenants, error) {
	switch {
	case c.authTokens != "" && c.authTokensFile != "":
		return nil, errors.New("--auth-tokens and --auth-tokens-file exclude each other")
	case c.authTokensFile != "":
		t, err := identity.ReadTenantsFile(c.authTokensFile)
		if err != nil {
			return nil, fmt.Errorf("--auth-tokens-file: %w", err)
		}
		return t, nil
	}
	t, err := identity.ParseTenants(c.authTokens)
	if err != nil {
		return nil, fmt.Errorf("--auth-tokens: %w", err)
	}
	return t, nil
}

// checkExposure refuses to listen beyond loopback without inbound auth.
func checkExposure(c *serveConfig, authed bool) error {
	host, _, err := net.SplitHostPort(c.listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", c.listen, err)
	}
	if host == "localhost" {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil && a.IsLoopback() {
		return nil
	}
	if c.insecureNoAuth || authed {
		return nil
	}
	return fmt.Errorf("--listen %s is not loopback: configure inbound auth tokens or pass --insecure-no-auth", c.listen)
}
