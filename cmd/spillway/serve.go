package main

import (
	"cmp"
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
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/mux"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/api"
	"github.com/spillway-dev/spillway/artifact/httpsafe"
	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/artifact/token"
	"github.com/spillway-dev/spillway/artifact/tracing"
	"github.com/spillway-dev/spillway/mcpproxy"
)

// serveConfig is everything `spillway serve` is told.
type serveConfig struct {
	storeFlags
	listen         string
	apiListen      string
	insecureNoAuth bool
	redirect       bool
	sweepEvery     time.Duration
	authTokens     string
	authTokensFile string
	mcpTokenFile   string
	maxUpload      int64
	limits         artifact.Limits
	writeStall     time.Duration
	oauth          oauthFlags
	auditLog       string // see audit.go
	proxyFlags
	// getenv reads Spillway's environment, for headers {env: NAME}; nil
	// is os.Getenv.
	getenv func(string) string
}

func (c *serveConfig) register(fs *flag.FlagSet) {
	c.storeFlags.register(fs)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "`address` to listen on (a non-loopback one needs inbound auth)")
	fs.StringVar(&c.apiListen, "api-listen", "", "serve the management API (/v1) on this `address` instead of --listen (loopback only, without inbound auth)")
	fs.BoolVar(&c.insecureNoAuth, "insecure-no-auth", false, "allow a non-loopback --listen or --api-listen without inbound auth tokens")
	fs.BoolVar(&c.redirect, "redirect", false, "answer fetches with a 302 to a storage URL presigned for 60s (S3 stores)")
	fs.DurationVar(&c.sweepEvery, "sweep-every", time.Minute, "how often expired artifacts are deleted")
	fs.StringVar(&c.authTokens, "auth-tokens", "", "inbound bearer `tokens` for /mcp and /v1/artifacts, as token=tenant,... (the tenant after the last =; not on the command line with --upstream-cmd)")
	fs.StringVar(&c.authTokensFile, "auth-tokens-file", "", "`file` of inbound bearer tokens instead of --auth-tokens, one token=tenant per line (# comments; mode 0600)")
	fs.StringVar(&c.mcpTokenFile, "mcp-token-file", "", "`file` keeping the bearer token /mcp requires without inbound auth tokens, created if missing (default DATA/mcp.token)")
	fs.Int64Var(&c.maxUpload, "max-upload", 1<<30, "largest upload to /v1/artifacts, in `bytes`")
	fs.IntVar(&c.limits.MaxPerAddr, "max-per-addr", 64, "most requests to /a/ and /v1/ one client address may have in flight, more getting a 503 (0: no cap)")
	fs.Int64Var(&c.limits.MinUploadRate, "min-upload-rate", 1024, "slowest upload accepted, in `bytes` per second over --upload-window (0: none)")
	fs.DurationVar(&c.limits.UploadWindow, "upload-window", 20*time.Second, "window over which --min-upload-rate is measured")
	fs.DurationVar(&c.writeStall, "write-stall-timeout", 30*time.Second, "cut a fetch or /mcp stream whose client reads nothing for this long (0: never)")
	c.oauth.register(fs)
	c.registerAudit(fs)
	c.proxyFlags.register(fs)
}

func serveMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	c, log, code := parseServe(args, stderr, getenv)
	if c == nil {
		return code
	}
	stopTracing, err := startTracing(ctx, getenv, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	defer stopTracing() // after the servers' shutdown: their last spans go too
	s, err := newServer(ctx, c, log, stdout, stderr)
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

// parseServe reads serve's configuration from args, the environment and
// the config file, and opens its logger. A nil config comes with the exit
// code: 0 for -h, 2 for a configuration refused (said on stderr).
func parseServe(args []string, stderr io.Writer, getenv func(string) string) (*serveConfig, *slog.Logger, int) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c serveConfig
	c.register(fs)
	if err := parseLayered(fs, args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, nil, 0
		}
		fmt.Fprintln(stderr, "spillway serve:", err)
		return nil, nil, 2
	}
	var err error
	if fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	} else {
		err = refuseArgvSecrets(fs, &c)
	}
	var log *slog.Logger
	if err == nil {
		log, err = c.logger(stderr)
	}
	if err == nil && c.stdio && c.decisionLog == "-" {
		err = errors.New("--stdio owns stdout; write the decision log to a file")
	}
	if err != nil {
		fmt.Fprintln(stderr, "spillway serve:", err)
		return nil, nil, 2
	}
	c.getenv = getenv
	return &c, log, 0
}

// secretFlags are the flags whose values are secrets, with the forms
// that keep them off the command line. A config file that sets one must
// be as private as a secret file (see parseLayered).
var secretFlags = map[string]string{
	"auth-tokens":  "--auth-tokens-file, SPILLWAY_AUTH_TOKENS or a --config file of mode 0600",
	"signing-keys": "--key-file, SPILLWAY_SIGNING_KEYS or a --config file of mode 0600",
}

// refuseArgvSecrets refuses a secret flag given on the command line (fs,
// once parsed) when an --upstream-cmd child runs: /proc/PID/cmdline is
// readable by every local user, so the child would read every tenant's
// token or the signing keys there whatever --upstream-user it runs as.
// The child inherits none of the SPILLWAY_* variables (see
// mcpproxy.CommandUpstream), and files are Spillway's own.
func refuseArgvSecrets(fs *flag.FlagSet, c *serveConfig) error {
	if c.upstreamCmd == "" && !configRunsCommands(c.config) {
		return nil
	}
	var errs []error
	fs.Visit(func(f *flag.Flag) { // the flags given on the command line only
		if instead, ok := secretFlags[f.Name]; ok {
			errs = append(errs, fmt.Errorf("--%s is refused on the command line with --upstream-cmd or a server's command: every local process, the child included, reads it in /proc/PID/cmdline; give it in %s", f.Name, instead))
		}
	})
	return errors.Join(errs...)
}

// server is a running `spillway serve`: tests build one with newServer and
// an address of 127.0.0.1:0.
type server struct {
	cfg     *serveConfig
	log     *slog.Logger
	deps    *deps
	tenants *identity.Tenants
	ln      net.Listener
	http    *http.Server
	apiLn   net.Listener // --api-listen; nil without
	apiHTTP *http.Server
	proxy   *mcpproxy.Proxy // nil without an upstream
	// servers is the config file as last applied, when it lists servers:
	// watchConfig applies its changes.
	servers *loadedServers
	// notReady is the last not-ready detail logged, so a failing probe
	// logs its cause once, not every few seconds.
	notReady atomic.Value
}

func newServer(ctx context.Context, c *serveConfig, log *slog.Logger, stdout, stderr io.Writer) (*server, error) {
	servers, err := c.loadServers()
	if err != nil {
		return nil, err
	}
	tenants, err := c.tenants()
	if err != nil {
		return nil, err
	}
	if err := c.oauth.check(); err != nil {
		return nil, err
	}
	mcpTenants, mcpTokenFile, err := c.mcpTenants(tenants, stderr)
	if err != nil {
		return nil, err
	}
	if err := c.checkExposures(tenants); err != nil {
		return nil, err
	}
	s := &server{cfg: c, log: log, tenants: tenants, servers: servers}
	ok := false
	defer func() {
		if !ok {
			s.close()
		}
	}()
	if err := s.listen(); err != nil {
		return nil, err
	}
	if s.deps, err = c.open(ctx, log, stdout, "http://"+s.ln.Addr().String()); err != nil {
		return nil, err
	}
	if s.deps.svc.Audit, err = c.openAudit(stdout, stderr, s.deps); err != nil {
		return nil, err
	}
	// Every route but /a/ checks Host and Origin; the public URL's host is
	// this server's name.
	guard := &identity.Guard{Hosts: append(splitList(c.allowedHosts), s.deps.svc.PublicURL.Host), Origins: splitList(c.allowedOrigins)}
	r := newRouter()
	oauth, err := c.oauth.build(s.deps.svc.PublicURL, log)
	if err != nil {
		return nil, err
	}
	if oauth != nil && !c.stdio {
		mountOAuthMetadata(r, oauth)
	}
	// Access tokens open /mcp only: the management routes keep their
	// rule, the static tokens.
	mcpTenants = mcpTenants.WithOAuth(oauth)
	fetch, lim, apiOpts := s.mountArtifacts(r, guard)
	if s.proxy, err = s.newProxy(mcpTenants, guard, fetch); err != nil {
		return nil, err
	}
	h := s.withMCP(r, guard, mcpTokenFile)
	s.registerProbes(r, guard, s.authenticated)
	s.http = newHTTPServer(h, log)
	if s.apiLn != nil {
		s.apiHTTP = s.newAPIServer(apiOpts, lim, guard)
	}
	ok = true
	return s, nil
}

// checkExposures refuses a non-loopback --listen or --api-listen without
// inbound auth, unless --insecure-no-auth.
//
// OAuth protects /mcp on --listen (the management API is off there without
// static tokens), but not --api-listen, whose API it does not open.
func (c *serveConfig) checkExposures(tenants *identity.Tenants) error {
	allowed := c.insecureNoAuth || tenants.Required()
	if err := checkExposure("--listen", c.listen, allowed || c.oauth.on()); err != nil {
		return err
	}
	if c.apiListen != "" {
		return checkExposure("--api-listen", c.apiListen, allowed)
	}
	return nil
}

// listen opens --listen and --api-listen. With --stdio, a --listen
// address another process holds is replaced by a free loopback port.
func (s *server) listen() error {
	c := s.cfg
	var err error
	if s.ln, err = net.Listen("tcp", c.listen); err != nil {
		if !c.stdio || !errors.Is(err, syscall.EADDRINUSE) {
			return err
		}
		// The agent launched us for stdio; HTTP only serves the links. A
		// second agent's Spillway holds the port: take a free one rather
		// than leave the agent with "connection closed".
		s.log.Warn("--listen address is taken; serving links on a free loopback port instead", "listen", c.listen, "err", err)
		if s.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return err
		}
	}
	if c.apiListen != "" {
		if s.apiLn, err = net.Listen("tcp", c.apiListen); err != nil {
			return fmt.Errorf("--api-listen: %w", err)
		}
	}
	return nil
}

// mountArtifacts mounts the fetch endpoint (/a/) on r, and the management
// API (/v1) unless --api-listen serves it; both share the per-address cap
// and the upload rate of lim. It returns the API's options for
// --api-listen.
func (s *server) mountArtifacts(r *mux.Router, guard *identity.Guard) (*artifact.Handler, *artifact.Limiter, api.Options) {
	c := s.cfg
	fo := artifact.HandlerOptions{
		Logger:            s.log,
		Redirect:          c.redirect,
		WriteStallTimeout: cmp.Or(c.writeStall, -1), // the flag's 0 is "never"
	}
	if tracing.On() {
		fo.Trace = traceFetch
	}
	fetch := artifact.NewHandler(s.deps.svc, fo)
	lim := artifact.NewLimiter(c.limits)
	limited := r.NewRoute().Subrouter()
	limited.Use(lim.Middleware)
	fetch.Register(limited)
	apiOpts := api.Options{Tenants: s.tenants, Guard: guard, MaxUpload: c.maxUpload, Logger: s.log}
	if s.apiLn == nil {
		// Off (404) unless inbound tokens are configured: on this
		// listener, sandboxes holding links may be callers.
		api.New(s.deps.svc, apiOpts).Register(limited)
	}
	return fetch, lim, apiOpts
}

// newProxy builds the MCP proxy, nil without an upstream; the long
// strings of upstream messages wait in DATA/spill unless --spill-dir
// says where.
func (s *server) newProxy(tenants *identity.Tenants, guard *identity.Guard, fetch http.Handler) (*mcpproxy.Proxy, error) {
	c := s.cfg
	c.proxyFlags.writeStall = cmp.Or(c.writeStall, -1) // the flag's 0 is "never"
	if c.spillDir == "" {
		c.spillDir = filepath.Join(c.data, "spill")
		if err := os.MkdirAll(c.spillDir, 0o700); err != nil {
			return nil, fmt.Errorf("--spill-dir: %w", err)
		}
	}
	return c.proxyFlags.build(s.deps, tenants, guard, fetch, s.log)
}

// loadServers reads the servers of the config file, if it lists any,
// into c.servers; it returns the file as read.
func (c *serveConfig) loadServers() (*loadedServers, error) {
	if c.config == "" {
		return nil, nil
	}
	ls, err := loadServers(c.config, c.env())
	if err != nil || ls.servers == nil {
		return nil, err
	}
	c.servers = ls.servers
	return ls, nil
}

// env returns how Spillway's environment is read.
func (c *serveConfig) env() func(string) string {
	if c.getenv != nil {
		return c.getenv
	}
	return os.Getenv
}

// withMCP returns what --listen serves: r, with the proxy at /mcp. With
// --stdio the agent that launched us speaks MCP on stdio: the listener
// only serves links, and another local process gets no MCP here.
func (s *server) withMCP(r http.Handler, guard *identity.Guard, mcpTokenFile string) http.Handler {
	if s.proxy == nil || s.cfg.stdio {
		return r
	}
	if mcpTokenFile != "" {
		s.log.Info("/mcp requires the bearer token kept in the MCP token file", "mcp_token_file", mcpTokenFile)
	}
	return mcpFirst{mcp: api.Guarded(guard, s.proxy), rest: r}
}

// newAPIServer returns the server of --api-listen: the management API
// (without inbound tokens, open to whoever reaches that loopback address)
// and the probes, which tell their details to every caller there.
func (s *server) newAPIServer(apiOpts api.Options, lim *artifact.Limiter, guard *identity.Guard) *http.Server {
	ar := newRouter()
	apiOpts.Anonymous = true
	limitedAPI := ar.NewRoute().Subrouter()
	limitedAPI.Use(lim.Middleware)
	api.New(s.deps.svc, apiOpts).Register(limitedAPI)
	s.registerProbes(ar, guard, func(*http.Request) bool { return true })
	return newHTTPServer(ar, s.log)
}

// newRouter returns a router that answers unknown routes with a 404 in the
// service's JSON error form and safety headers, code no_route: not an
// artifact's not_found, which would tell a client the path named one.
// Paths are taken as sent: mux's cleaning would answer /a//ID?t=TOKEN with
// a 301 repeating the token in Location, without the safety headers; an
// unclean path matches no route instead.
func newRouter() *mux.Router {
	r := mux.NewRouter().SkipClean(true)
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpsafe.WriteError(w, errNoRoute)
	})
	return r
}

var errNoRoute = httpsafe.NewError(http.StatusNotFound, "no_route", "nothing is served at this path")

// mcpFirst serves /mcp, the path every MCP message takes, without the
// router, which would try the pattern of every other route first.
type mcpFirst struct{ mcp, rest http.Handler }

func (m mcpFirst) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/mcp" {
		m.mcp.ServeHTTP(w, r)
		return
	}
	m.rest.ServeHTTP(w, r)
}

func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// No WriteTimeout: fetches and MCP streams may legitimately run long.
	}
}

// registerProbes mounts /healthz, /readyz and /metrics behind the guard;
// /readyz tells its details, and /metrics the registry's series (every
// tenant's together; see newRegistry), only to callers detail admits: a sandbox holding a link
// reaches --listen too.
func (s *server) registerProbes(r *mux.Router, g *identity.Guard, detail func(*http.Request) bool) {
	r.Handle("/healthz", api.Guarded(g, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	}))).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/readyz", api.Guarded(g, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.readyz(w, r, detail(r))
	}))).Methods(http.MethodGet, http.MethodHead)
	metrics := metricsHandler(s.deps.registry, slog.NewLogLogger(s.log.Handler(), slog.LevelWarn))
	r.Handle("/metrics", api.Guarded(g, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !detail(r) {
			s.refuseMetrics(w)
			return
		}
		metrics.ServeHTTP(w, r)
	}))).Methods(http.MethodGet)
}

// authenticated reports whether r carries a valid inbound token.
func (s *server) authenticated(r *http.Request) bool {
	if !s.tenants.Required() {
		return false
	}
	_, err := s.tenants.Authenticate(r)
	return err == nil
}

// close releases what newServer opened, for a server that never ran.
func (s *server) close() {
	if s.proxy != nil {
		s.proxy.Close()
	}
	if s.deps != nil {
		s.deps.Close()
	}
	for _, ln := range []net.Listener{s.ln, s.apiLn} {
		if ln != nil {
			ln.Close()
		}
	}
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
	if s.servers != nil && s.proxy != nil {
		// Servers added to or removed from the file apply within a second.
		go s.watchConfig(ctx, configPoll)
	}
	errc := make(chan error, 2)
	go func() { errc <- s.http.Serve(s.ln) }()
	attrs := []any{"addr", "http://" + s.Addr(), "public_url", s.deps.svc.PublicURL.String(),
		"version", versionString(), "policy_revision", s.deps.engine.Revision()}
	if s.apiHTTP != nil {
		go func() { errc <- s.apiHTTP.Serve(s.apiLn) }()
		attrs = append(attrs, "api_addr", "http://"+s.APIAddr())
	}
	if s.servers != nil {
		attrs = append(attrs, "servers", serverNames(s.servers.servers)) // names only: never a header
	}
	s.log.Info("spillway listening", attrs...)
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		s.log.Info("shutting down")
	}
	if s.proxy != nil {
		// Ends every MCP stream now: open GET streams would otherwise hold
		// Shutdown for its whole timeout.
		s.proxy.Close()
	}
	// Requests in flight get a short grace (a fetch finishing, a call
	// answering); what is still open after it is cut, which is what
	// stopping means: a shutdown ends within shutdownGrace whatever
	// clients hold, and is no failure.
	sctx, scancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer scancel()
	for _, h := range []*http.Server{s.http, s.apiHTTP} {
		if h == nil {
			continue
		}
		if serr := h.Shutdown(sctx); serr != nil {
			s.log.Warn("connections still open at the end of the shutdown grace are cut", "grace", shutdownGrace)
			h.Close()
		}
	}
	return err
}

// shutdownGrace bounds a graceful shutdown, within the 5 s an
// orchestrator or a launching agent is promised.
const shutdownGrace = 3 * time.Second

// APIAddr is the address of --api-listen; "" without it.
func (s *server) APIAddr() string {
	if s.apiLn == nil {
		return ""
	}
	return s.apiLn.Addr().String()
}

// readyz answers 200 or 503. Only with detail does the body say why (store
// and policy errors name endpoints, buckets and paths); the log always does.
func (s *server) readyz(w http.ResponseWriter, r *http.Request, detail bool) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	checks := map[string]string{"store": "ok", "policy": "ok"}
	status := http.StatusOK
	if err := s.deps.svc.Ping(ctx); err != nil {
		checks["store"], status = err.Error(), http.StatusServiceUnavailable
	}
	if err := s.deps.engine.Ready(); err != nil {
		checks["policy"], status = err.Error(), http.StatusServiceUnavailable
	}
	why := ""
	if status != http.StatusOK {
		why = "store: " + checks["store"] + "; policy: " + checks["policy"]
	}
	if prev, _ := s.notReady.Swap(why).(string); why != prev && why != "" {
		s.log.Warn("not ready", "store", checks["store"], "policy", checks["policy"])
	}
	body := map[string]any{"ready": status == http.StatusOK, "policy_revision": s.deps.engine.Revision()}
	if detail {
		// A refused policy reload leaves the last good policy serving: the
		// replica stays ready, and says what was refused.
		body["checks"], body["policy"] = checks, s.deps.engine.Status()
		s.serversReport(body, checks)
	}
	httpsafe.SetSafetyHeaders(w.Header())
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(body)
}

// serversReport adds a gateway's servers to a detailed /readyz body: each
// one's connections up and down and its last error (no header, no
// token: the errors of dialing and handshakes), and checks["servers"]
// names those whose connections are all down. A server that is down does
// not make the process unready: the gateway serves the others, and fails
// only that server's requests.
func (s *server) serversReport(body map[string]any, checks map[string]string) {
	if s.proxy == nil {
		return
	}
	hs := s.proxy.Servers()
	if hs == nil {
		return
	}
	var down []string
	for _, h := range hs {
		if h.Up == 0 && h.Down > 0 {
			down = append(down, h.Name)
		}
	}
	checks["servers"] = "ok"
	if len(down) > 0 {
		checks["servers"] = "down: " + strings.Join(down, ", ")
	}
	body["servers"] = hs
}

// refuseMetrics answers a caller /metrics is not for: 401 asking for a
// token where inbound tokens are configured, else 403 (no token would do;
// --api-listen serves them).
func (s *server) refuseMetrics(w http.ResponseWriter) {
	if s.tenants.Required() {
		w.Header().Set("WWW-Authenticate", `Bearer realm="spillway"`)
		httpsafe.WriteError(w, httpsafe.NewError(http.StatusUnauthorized, "unauthenticated", "a valid bearer token is required"))
		return
	}
	httpsafe.WriteError(w, httpsafe.NewError(http.StatusForbidden, "forbidden",
		"metrics are served on --api-listen, or here with an inbound token"))
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

// checkExposure refuses to listen beyond loopback unless allowed.
func checkExposure(flag, addr string, allowed bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %w", flag, addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil && a.IsLoopback() {
		return nil
	}
	if allowed {
		return nil
	}
	return fmt.Errorf("%s %s is not loopback: configure inbound auth tokens or pass --insecure-no-auth", flag, addr)
}
