package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy"
)

// proxyFlags configure the MCP proxy of `spillway serve`.
type proxyFlags struct {
	upstreamURL    string
	upstreamCmd    string
	upstreamEnv    envList
	upstreamUser   string
	upstreamHeader headerList
	upstreamOAuth  upstreamOAuthFlags
	upstreamTrans  string
	strictEras     bool
	stdio          bool
	allowedHosts   string
	allowedOrigins string
	maxBody        int64
	maxMessage     int64
	stdioMaxMsg    int64
	resultBudget   int64
	previewBudget  int
	thumbnails     bool
	thumbMax       int
	maxSessions    int
	bridgeSessions int
	bridgeWait     time.Duration
	spillDir       string
	spillMax       int64
	spillMaxTenant int64
	inlineMax      int64
	upstreamStall  time.Duration
	serverPrefix   string
	serverSep      string
	// servers are the config file's servers (see loadServers): the
	// upstream is then a gateway of them.
	servers []mcpproxy.Server

	offload          bool
	textThreshold    int64
	binaryThreshold  int64
	offloadTTL       time.Duration
	offloadResources bool
	failClosed       bool
	storeStall       time.Duration
	noOffloadTools   string
	streamMode       string
	maxInlineRead    int64
	artifactTools    bool
	streamWindow     time.Duration
	streams          mcpproxy.StreamOptions
	pollAfter        time.Duration
	writeStall       time.Duration // serve's --write-stall-timeout (negative: never)
	keepAlive        time.Duration
}

func (f *proxyFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.upstreamURL, "upstream-url", "", "MCP server to proxy, over Streamable HTTP (`URL`)")
	fs.StringVar(&f.upstreamCmd, "upstream-cmd", "", "MCP server to proxy, run as a stdio child process (`command` line)")
	fs.Var(&f.upstreamEnv, "upstream-env", "variables the --upstream-cmd child gets beyond PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TZ, TMPDIR and TERM, as NAME (Spillway's value) or NAME=VALUE (`list`, comma-separated, repeatable)")
	fs.StringVar(&f.upstreamUser, "upstream-user", "", "run the --upstream-cmd child as this `user`, kept from Spillway's files (name or uid; needs root or CAP_SETUID)")
	fs.Var(&f.upstreamHeader, "upstream-header", "`header` sent to --upstream-url, as Name: value (repeatable; one per line in the environment or config file)")
	f.upstreamOAuth.register(fs)
	fs.StringVar(&f.upstreamTrans, "upstream-transport", "auto", "transport of --upstream-url: streamable, sse (legacy HTTP+SSE) or auto (legacy only if the upstream refuses an initialize POST)")
	fs.StringVar(&f.serverPrefix, "server-prefix", "", "with servers in the config file: which tool and prompt names get their server's name in front, always, never or collision (default always with two servers or more, never with one)")
	fs.StringVar(&f.serverSep, "server-separator", "", "with servers in the config file: what joins a server's name and a tool's, one to four of _ and . (default _)")
	fs.BoolVar(&f.strictEras, "strict-eras", false, "forward every request in its client's protocol era, never bridging eras")
	fs.BoolVar(&f.stdio, "stdio", false, "also serve MCP on stdin/stdout until stdin ends (for agents that launch servers)")
	fs.StringVar(&f.allowedHosts, "allowed-hosts", "", "Host names every route but /a/ accepts besides IP literals, localhost and the --public-url host (`list`, comma-separated; * for any)")
	fs.StringVar(&f.allowedOrigins, "allowed-origins", "", "browser Origins every route but /a/ accepts besides its own (`list`, comma-separated)")
	fs.Int64Var(&f.maxBody, "max-body", 4<<20, "largest request body a client may POST to /mcp, in `bytes`")
	fs.Int64Var(&f.maxMessage, "max-message", 1<<30, "largest part of one upstream message held in memory, in `bytes` (its strings over 64 KiB wait in --spill-dir)")
	fs.Int64Var(&f.stdioMaxMsg, "stdio-max-message", 10<<20, "largest message --stdio writes to its client, in `bytes` (-1: no cap)")
	fs.StringVar(&f.spillDir, "spill-dir", "", "`dir` where long strings of upstream messages, and images being thumbnailed, wait on disk (files unlinked at once; default DATA/spill)")
	fs.DurationVar(&f.upstreamStall, "upstream-stall-timeout", 2*time.Minute, "stop an upstream stalled this long in the middle of a message, or sending less than 1 KiB in that time (0: never)")
	fs.Int64Var(&f.inlineMax, "inline-max", 1<<30, "most `bytes` the upstream messages being read hold in memory together, their strings in --spill-dir aside")
	fs.Int64Var(&f.spillMax, "spill-max", 4<<30, "most `bytes` waiting in --spill-dir at once (offloads in progress may stage as much again)")
	fs.Int64Var(&f.spillMaxTenant, "spill-max-tenant", 0, "most `bytes` one tenant's upstream messages keep in --spill-dir at once (0: half of --spill-max with two tenants or more, else no bound; -1: no bound)")
	fs.IntVar(&f.maxSessions, "max-sessions", 64, "most session-era sessions with a stdio or legacy upstream (each holds a child or a stream)")
	fs.IntVar(&f.bridgeSessions, "bridge-sessions", 4, "most sessions of a session-era stdio or legacy upstream that one tenant's 2026-07-28 calls declaring sampling, elicitation or roots hold at once, per set of declared capabilities")
	fs.DurationVar(&f.bridgeWait, "bridge-wait", time.Minute, "how long a call waits for one of its --bridge-sessions before a JSON-RPC error (0: refused at once)")
	fs.BoolVar(&f.offload, "offload", true, "offload large tool outputs to artifacts (the policy has the last word)")
	fs.Int64Var(&f.resultBudget, "result-budget", 6<<10, "most `bytes` of a tools/call result the agent receives inline (content and structuredContent, previews and links included)")
	fs.IntVar(&f.previewBudget, "preview-budget", 2<<10, "`bytes` of preview text the offloaded parts of one result share")
	fs.BoolVar(&f.thumbnails, "thumbnails", true, "give an offloaded image an inline thumbnail, so that the model still sees it")
	fs.IntVar(&f.thumbMax, "thumbnail-size", 512, "longest side of a thumbnail, in `pixels`")
	fs.Int64Var(&f.textThreshold, "text-threshold", 16<<10, "text items above this many `bytes` are offload candidates")
	fs.Int64Var(&f.binaryThreshold, "binary-threshold", 4<<10, "image, audio and blob items above this many decoded `bytes` are offload candidates")
	fs.DurationVar(&f.offloadTTL, "offload-ttl", 15*time.Minute, "lifetime of the links in offloaded results (the policy and --max-ttl may shorten it)")
	fs.BoolVar(&f.offloadResources, "offload-resources", false, "also offload large resources/read results of the upstream")
	fs.BoolVar(&f.failClosed, "offload-fail-closed", false, "answer a tool error instead of the content inline when the store fails (always, over --result-budget)")
	fs.DurationVar(&f.storeStall, "store-stall-timeout", 30*time.Second, "fail storing an offloaded result once less than 64 KiB reach the store in this long (no bound on the total time)")
	fs.StringVar(&f.streamMode, "stream-mode", "direct", "how resources/stream delivers artifacts: direct (bytes in the response), redirect (302 to presigned storage; S3) or download (a downloadUrl)")
	fs.Int64Var(&f.maxInlineRead, "max-inline-read", 32<<20, "largest artifact resources/read returns (base64 in JSON), in `bytes`")
	fs.BoolVar(&f.artifactTools, "artifact-tools", true, "list and answer spillway_artifact_read, _grep and _jq, for agents without a sandbox")
	fs.DurationVar(&f.streamWindow, "stream-window", 2*time.Minute, "how long SSE events stay replayable for a client that reconnects with Last-Event-ID")
	fs.DurationVar(&f.streams.ResumeMin, "stream-resume-min", time.Second, "resumable streams: the least a client should wait before resuming (resumeInterval.min)")
	fs.DurationVar(&f.streams.ResumeMax, "stream-resume-max", 5*time.Minute, "resumable streams: a stream nobody reads, polls or resumes this long is abandoned, its request cancelled (resumeInterval.max)")
	fs.Int64Var(&f.streams.PerStream, "stream-bytes", 1<<20, "resumable streams: `bytes` one stream's waiting messages may hold in memory (past it the stream ends with an error)")
	fs.Int64Var(&f.streams.Total, "streams-bytes", 64<<20, "resumable streams: `bytes` every stream's waiting messages may hold together")
	fs.IntVar(&f.streams.Max, "max-streams", 10_000, "resumable streams open at once")
	fs.DurationVar(&f.keepAlive, "sse-keep-alive", 15*time.Second, "send an SSE comment on an open /mcp stream this often, against idle timeouts (0: never)")
	fs.DurationVar(&f.pollAfter, "sse-poll-after", 0, "end a long call's SSE stream after this long, for the client to poll the rest (SEP-1699; 0: never)")
	fs.StringVar(&f.noOffloadTools, "no-offload-tools", "", "tools whose outputs are never offloaded (`list`, comma-separated)")
}

// build returns the proxy, or nil when no upstream is configured.
func (f *proxyFlags) build(d *deps, tenants *identity.Tenants, guard *identity.Guard, fetch http.Handler, log *slog.Logger) (*mcpproxy.Proxy, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	up, err := f.upstream()
	if up == nil || err != nil {
		return nil, err
	}
	if f.storeStall <= 0 {
		return nil, errors.New("--store-stall-timeout: want a positive duration")
	}
	o := f.options(d, log)
	o.Upstream, o.Tenants, o.Guard, o.Fetch = up, tenants, guard, fetch
	if d.registry != nil {
		o.Registerer = d.registry // the proxy's series on /metrics
	}
	if _, ok := up.(*mcpproxy.Gateway); ok {
		o.CallPolicy = d.engine // the call decision: which tenant may call which server's tools
	}
	return mcpproxy.New(o)
}

// check refuses flags that contradict each other or would hand Spillway's
// secrets to the child.
func (f *proxyFlags) check() error {
	switch f.streamMode {
	case mcpproxy.StreamDirect, mcpproxy.StreamRedirect, mcpproxy.StreamDownload:
	default:
		return errors.New("--stream-mode: want direct, redirect or download")
	}
	if len(f.upstreamEnv) > 0 && f.upstreamCmd == "" {
		return errors.New("--upstream-env needs --upstream-cmd")
	}
	// Spillway's own secrets never reach a child, even by name.
	if err := checkChildEnv(f.upstreamEnv); err != nil {
		return fmt.Errorf("--upstream-env %w", err)
	}
	if f.upstreamUser != "" && f.upstreamCmd == "" {
		return errors.New("--upstream-user needs --upstream-cmd")
	}
	return f.checkGateway()
}

// checkGateway refuses gateway flags without servers, and single-upstream
// flags with them.
func (f *proxyFlags) checkGateway() error {
	switch f.serverPrefix {
	case "", mcpproxy.PrefixAlways, mcpproxy.PrefixNever, mcpproxy.PrefixCollision:
	default:
		return errors.New("--server-prefix: want always, never or collision")
	}
	if f.servers == nil {
		if f.serverPrefix != "" || f.serverSep != "" {
			return errors.New("--server-prefix and --server-separator need servers in the config file")
		}
		return nil
	}
	if f.upstreamURL != "" || f.upstreamCmd != "" {
		return errors.New("servers in the config file and --upstream-url or --upstream-cmd exclude each other")
	}
	if len(f.upstreamHeader) > 0 {
		return errors.New("--upstream-header is for --upstream-url: give a server's headers in its headers")
	}
	if f.upstreamOAuth.on() {
		return errors.New("--upstream-oauth-* are for --upstream-url: give a server's in its oauth key")
	}
	return nil
}

// upstream returns the configured upstream, or nil without one.
func (f *proxyFlags) upstream() (mcpproxy.Upstream, error) {
	switch {
	case f.servers != nil:
		return &mcpproxy.Gateway{Servers: f.servers, Prefix: f.serverPrefix, Separator: f.serverSep}, nil
	case f.upstreamURL != "" && f.upstreamCmd != "":
		return nil, errors.New("--upstream-url and --upstream-cmd exclude each other")
	case f.upstreamURL != "":
		hu := &mcpproxy.HTTPUpstream{URL: f.upstreamURL, Header: http.Header(f.upstreamHeader)}
		switch f.upstreamTrans {
		case "auto":
		case "streamable", "sse":
			hu.Transport = f.upstreamTrans
		default:
			return nil, errors.New("--upstream-transport: want streamable, sse or auto")
		}
		var err error
		hu.OAuth, err = f.upstreamOAuth.client(hu.Header)
		return hu, err
	case f.upstreamCmd != "":
		cu, err := mcpproxy.ParseCommand(f.upstreamCmd)
		if err != nil {
			return nil, errors.New("--upstream-cmd: " + err.Error())
		}
		cu.Env = f.upstreamEnv
		cu.User = f.upstreamUser
		return cu, nil
	case f.stdio:
		return nil, errors.New("--stdio needs --upstream-url, --upstream-cmd or servers in the config file")
	}
	return nil, nil
}

// options are the proxy's options the flags set; the caller adds the
// upstream, who may call, and the fetch endpoint.
func (f *proxyFlags) options(d *deps, log *slog.Logger) mcpproxy.Options {
	return mcpproxy.Options{
		Offloader:            f.offloader(d, log),
		OffloadResources:     f.offloadResources,
		Artifacts:            d.svc,
		NoArtifactTools:      !f.artifactTools,
		StreamMode:           f.streamMode,
		MaxInlineRead:        f.maxInlineRead,
		MaxBody:              f.maxBody,
		MaxMessage:           f.maxMessage,
		StdioMaxMessage:      f.stdioMaxMsg,
		SpillDir:             f.spillDir,
		SpillMax:             f.spillMax,
		SpillMaxTenant:       f.spillMaxTenant,
		InlineMax:            f.inlineMax,
		MaxSessions:          f.maxSessions,
		BridgeSessions:       f.bridgeSessions,
		BridgeWait:           cmp.Or(f.bridgeWait, -1), // the flag's 0 is "at once"
		StrictEras:           f.strictEras,
		StreamWindow:         f.streamWindow,
		Streams:              f.streams,
		StreamPollAfter:      f.pollAfter,
		StreamKeepAlive:      cmp.Or(f.keepAlive, -1), // the flag's 0 is "never"
		WriteStallTimeout:    f.writeStall,
		UpstreamStallTimeout: cmp.Or(f.upstreamStall, -1), // the flag's 0 is "never"
		Logger:               log,
	}
}

// offloader returns the offloader the flags configure, nil with
// --offload=false.
func (f *proxyFlags) offloader(d *deps, log *slog.Logger) *mcpproxy.Offloader {
	if !f.offload {
		return nil
	}
	tools := map[string]bool{}
	for _, t := range splitList(f.noOffloadTools) {
		tools[t] = false
	}
	return mcpproxy.NewOffloader(d.svc, d.engine, mcpproxy.OffloadOptions{
		Budget:          f.resultBudget,
		PreviewBudget:   f.previewBudget,
		NoThumbnails:    !f.thumbnails,
		ThumbMax:        f.thumbMax,
		TextThreshold:   f.textThreshold,
		BinaryThreshold: f.binaryThreshold,
		TTL:             f.offloadTTL,
		FailClosed:      f.failClosed,
		StoreStall:      f.storeStall,
		Tools:           tools,
		Server:          upstreamName(f),
		StageDir:        f.spillDir,
		StageMax:        f.spillMax,
		Logger:          log,
	})
}

// upstreamName names the upstream in policy inputs: its host or program.
func upstreamName(f *proxyFlags) string {
	if f.upstreamURL != "" {
		if u, err := url.Parse(f.upstreamURL); err == nil {
			return u.Host
		}
	}
	if cu, err := mcpproxy.ParseCommand(f.upstreamCmd); err == nil {
		return filepath.Base(cu.Command)
	}
	return ""
}

// envList is --upstream-env: entries NAME or NAME=VALUE, from a comma
// list, the flag repeated, or both. A VALUE holding a comma cannot be
// given here: set it in Spillway's environment and pass its NAME.
type envList []string

func (l *envList) String() string { return strings.Join(*l, ",") }

func (l *envList) Set(s string) error {
	for _, e := range splitList(s) {
		name, _, _ := strings.Cut(e, "=")
		if name == "" || strings.ContainsAny(name, " \t\x00") {
			return fmt.Errorf("%q is not NAME or NAME=VALUE", e)
		}
		*l = append(*l, e)
	}
	return nil
}

// headerList is --upstream-header: each value one "Name: value" header,
// whose value may hold any character a header may (";" and "," included:
// cookies, some API keys). A value with newlines (from the environment or
// a YAML block) holds one header per line.
type headerList http.Header

func (l *headerList) String() string {
	var b strings.Builder
	for k, vs := range *l {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: <%d bytes>\n", k, len(v)) // values are credentials
		}
	}
	return b.String()
}

func (l *headerList) Set(s string) error {
	if *l == nil {
		*l = headerList{}
	}
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		k = strings.TrimSpace(k)
		if !ok || !validHeaderName(k) || strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("a header must be Name: value (name %.40q)", k)
		}
		http.Header(*l).Add(k, strings.TrimSpace(v))
	}
	return nil
}

// validHeaderName: an RFC 9110 token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
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
