package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/spillway-dev/spillway/artifact/token"
	"github.com/spillway-dev/spillway/mcpproxy"
)

// configFile is a parsed config file: the flag settings, and the tool
// servers of a gateway under the one key that is not a flag.
type configFile struct {
	// Servers is nil without a servers key (or with "servers:" and
	// nothing after it), non-nil for a list, even an empty one.
	Servers *[]serverYAML `yaml:"servers"`
	// Flags are every other key, each a flag name.
	Flags map[string]any `yaml:",inline"`
}

// parseConfig decodes a config file's bytes. The servers are decoded
// strictly: a key a server does not have is an error. Flag keys are
// checked by the caller, which knows the flags.
func parseConfig(b []byte) (*configFile, error) {
	var cf configFile
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cf); err != nil && !errors.Is(err, io.EOF) {
		return nil, unquoted(err)
	}
	return &cf, nil
}

// quotedValue is the start of the value a yaml.TypeError quotes, as in
// "cannot unmarshal !!str `Bearer ...` into T".
var quotedValue = regexp.MustCompile(" `.*` into ")

// unquoted returns err without the values a yaml.TypeError quotes: a
// header or an environment entry written in the wrong shape may be a
// credential, and errors are logged.
func unquoted(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = quotedValue.ReplaceAllString(m, " into ")
	}
	return &yaml.TypeError{Errors: msgs}
}

// serverYAML is one entry of the config file's servers list.
type serverYAML struct {
	Name           string                  `yaml:"name"`
	URL            string                  `yaml:"url"`
	Transport      string                  `yaml:"transport"`
	Headers        map[string]headerSource `yaml:"headers"`
	OAuth          *oauthClientYAML        `yaml:"oauth"`
	Command        string                  `yaml:"command"`
	Args           []string                `yaml:"args"`
	Env            []string                `yaml:"env"`
	Dir            string                  `yaml:"dir"`
	User           string                  `yaml:"user"`
	ConnectTimeout time.Duration           `yaml:"connect_timeout"`
	CallTimeout    time.Duration           `yaml:"call_timeout"`
	Tools          struct {
		Allow []string `yaml:"allow"`
		Deny  []string `yaml:"deny"`
	} `yaml:"tools"`
	Offload *struct {
		ResultBudget    int64         `yaml:"result_budget"`
		TextThreshold   int64         `yaml:"text_threshold"`
		BinaryThreshold int64         `yaml:"binary_threshold"`
		LinkTTL         time.Duration `yaml:"link_ttl"`
		Never           []string      `yaml:"never"`
	} `yaml:"offload"`
}

// headerSource is where a header's value comes from: exactly one of a
// private file, one of Spillway's environment variables, or a literal.
type headerSource struct {
	kind, arg string // "file", "env" or "value"
}

// UnmarshalYAML reads {file: PATH}, {env: NAME} or {value: TEXT}. Its
// errors never quote the node: a header written as a plain string is
// likely a credential.
func (h *headerSource) UnmarshalYAML(n *yaml.Node) error {
	const want = "want {file: PATH}, {env: NAME} or {value: TEXT}"
	if n.Kind != yaml.MappingNode || len(n.Content) != 2 {
		return fmt.Errorf("line %d: a header's value: %s", n.Line, want)
	}
	k, v := n.Content[0], n.Content[1]
	switch k.Value {
	case "file", "env", "value":
	default:
		return fmt.Errorf("line %d: a header's value: %s, not %.20q", n.Line, want, k.Value)
	}
	if v.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a header's %s: want a string", n.Line, k.Value)
	}
	h.kind, h.arg = k.Value, v.Value
	return nil
}

// validServerName is the gateway's rule for a server's name (the prefix
// of its tools).
var validServerName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,31}$`)

// checkServers validates the servers list without reading anything, so
// that a mistake is told before a secret file is opened.
func checkServers(list []serverYAML) error {
	if len(list) == 0 {
		return errors.New("servers: the list is empty")
	}
	seen := map[string]bool{}
	for i, s := range list {
		if !validServerName.MatchString(s.Name) {
			return fmt.Errorf("servers[%d]: name %.40q: want a letter, then up to 31 letters, digits or '-'", i, s.Name)
		}
		if seen[s.Name] {
			return fmt.Errorf("server %q: the name is used twice", s.Name)
		}
		seen[s.Name] = true
		if err := s.check(); err != nil {
			return fmt.Errorf("server %q: %w", s.Name, err)
		}
	}
	return nil
}

// check validates one server's settings.
func (s *serverYAML) check() error {
	switch {
	case (s.URL == "") == (s.Command == ""):
		return errors.New("want exactly one of url and command")
	case s.URL != "":
		return s.checkHTTP()
	}
	return s.checkCommand()
}

func (s *serverYAML) checkHTTP() error {
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("url: want an absolute http(s) URL")
	}
	if u.User != nil {
		return errors.New("url: credentials go in headers, not in the URL")
	}
	switch s.Transport {
	case "", "auto", "streamable", "sse":
	default:
		return fmt.Errorf("transport %.20q: want streamable, sse or auto", s.Transport)
	}
	if len(s.Args) > 0 || len(s.Env) > 0 || s.Dir != "" || s.User != "" {
		return errors.New("args, env, dir and user are for a command, not a url")
	}
	seen := map[string]bool{}
	for k, h := range s.Headers {
		if !validHeaderName(k) {
			return fmt.Errorf("header %.40q: not a header name", k)
		}
		if seen[http.CanonicalHeaderKey(k)] {
			return fmt.Errorf("header %s: given twice", k)
		}
		seen[http.CanonicalHeaderKey(k)] = true
		if h.arg == "" {
			return fmt.Errorf("header %s: its %s is empty", k, h.kind)
		}
	}
	if s.OAuth != nil {
		if err := s.OAuth.check(s.Headers); err != nil {
			return err
		}
	}
	return s.checkCommon()
}

func (s *serverYAML) checkCommand() error {
	if s.Transport != "" || len(s.Headers) > 0 || s.OAuth != nil {
		return errors.New("transport, headers and oauth are for a url, not a command")
	}
	if err := checkChildEnv(s.Env); err != nil {
		return fmt.Errorf("env: %w", err)
	}
	return s.checkCommon()
}

// checkCommon validates what every kind of server may set.
func (s *serverYAML) checkCommon() error {
	if s.ConnectTimeout < 0 || s.CallTimeout < 0 {
		return errors.New("connect_timeout and call_timeout: want 0 or more")
	}
	for _, g := range append(append([]string(nil), s.Tools.Allow...), s.Tools.Deny...) {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("tools: pattern %q: %w", g, err)
		}
	}
	if o := s.Offload; o != nil && (o.ResultBudget < 0 || o.TextThreshold < 0 || o.BinaryThreshold < 0 || o.LinkTTL < 0) {
		return errors.New("offload: want sizes and link_ttl of 0 (keep the flag's) or more")
	}
	return nil
}

// checkChildEnv refuses a child environment entry that is not NAME or
// NAME=VALUE, or that names one of Spillway's secrets.
func checkChildEnv(env []string) error {
	for _, e := range env {
		name, _, _ := strings.Cut(e, "=")
		if name == "" || strings.ContainsAny(name, " \t\x00") {
			return fmt.Errorf("%.40q is not NAME or NAME=VALUE", name)
		}
		for flag := range secretFlags {
			if name == envName(flag) {
				return fmt.Errorf("%s: the child must not hold Spillway's secrets", name)
			}
		}
	}
	return nil
}

// headerSources reports whether a server sets a header {value: ...} in
// the file itself, and whether one reads a header {file: ...}.
func headerSources(list []serverYAML) (literal, files bool) {
	for _, s := range list {
		for _, h := range s.Headers {
			literal = literal || h.kind == "value"
			files = files || h.kind == "file"
		}
		if o := s.OAuth; o != nil {
			literal = literal || o.ClientSecret.kind == "value"
			files = files || o.ClientSecret.kind == "file"
		}
	}
	return literal, files
}

// resolveServers turns a checked list into the gateway's servers, reading
// header values from their files and the environment (getenv). Errors
// name the header and its source, never its value.
func resolveServers(list []serverYAML, getenv func(string) string) ([]mcpproxy.Server, error) {
	out := make([]mcpproxy.Server, 0, len(list))
	for _, s := range list {
		up, err := s.upstream(getenv)
		if err != nil {
			return nil, fmt.Errorf("server %q: %w", s.Name, err)
		}
		srv := mcpproxy.Server{Name: s.Name, Upstream: up, Allow: s.Tools.Allow, Deny: s.Tools.Deny,
			ConnectTimeout: s.ConnectTimeout, CallTimeout: s.CallTimeout}
		if o := s.Offload; o != nil {
			srv.Offload = &mcpproxy.ServerOffload{Budget: o.ResultBudget, TextThreshold: o.TextThreshold,
				BinaryThreshold: o.BinaryThreshold, TTL: o.LinkTTL, Never: o.Never}
		}
		out = append(out, srv)
	}
	return out, nil
}

// upstream is the server's upstream, its header values read.
func (s *serverYAML) upstream(getenv func(string) string) (mcpproxy.Upstream, error) {
	if s.Command != "" {
		return &mcpproxy.CommandUpstream{Command: s.Command, Args: s.Args, Env: s.Env, Dir: s.Dir, User: s.User}, nil
	}
	hu := &mcpproxy.HTTPUpstream{URL: s.URL, Transport: s.Transport}
	if hu.Transport == "auto" {
		hu.Transport = ""
	}
	if len(s.Headers) > 0 {
		hu.Header = http.Header{}
	}
	for k, h := range s.Headers {
		v, err := h.read(getenv)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", k, err)
		}
		if v == "" || strings.ContainsAny(v, "\r\n\x00") {
			return nil, fmt.Errorf("header %s: the value from its %s is empty or holds a line break or NUL", k, h.kind)
		}
		hu.Header.Set(k, v)
	}
	if s.OAuth != nil {
		c, err := s.OAuth.client(getenv)
		if err != nil {
			return nil, err
		}
		hu.OAuth = c
	}
	return hu, nil
}

// read returns the header's value.
func (h headerSource) read(getenv func(string) string) (string, error) {
	switch h.kind {
	case "file":
		b, err := token.ReadSecretFile(h.arg)
		if err != nil {
			return "", fmt.Errorf("file: %w", err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	case "env":
		v := getenv(h.arg)
		if v == "" {
			return "", fmt.Errorf("env: %s is not set", h.arg)
		}
		return v, nil
	}
	return h.arg, nil
}

// loadedServers are the servers of a config file, as read at one moment.
type loadedServers struct {
	servers []mcpproxy.Server // nil: the file has no servers key
	flags   map[string]any
	sum     [sha256.Size]byte // of the file's bytes
	// list is the servers as the file says them, to read their header
	// files again; files tells whether any header comes from a file.
	list  []serverYAML
	files bool
}

// loadServers reads the config file at name and its servers, checked
// and resolved. A file whose headers hold literal values must be private,
// as a file setting a secret flag.
func loadServers(name string, getenv func(string) string) (*loadedServers, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return loadServersFrom(name, b, getenv)
}

// loadServersFrom is loadServers of the file's bytes b.
func loadServersFrom(name string, b []byte, getenv func(string) string) (*loadedServers, error) {
	ls, err := serversFromBytes(b, getenv)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", name, err)
	}
	if ls.servers != nil && ls.literal {
		if _, err := token.ReadSecretFile(name); err != nil {
			return nil, fmt.Errorf("config %s sets a header's value: %w", name, err)
		}
	}
	return &ls.loadedServers, nil
}

// parsedServers is loadedServers and whether a header is a literal.
type parsedServers struct {
	loadedServers
	literal bool
}

// serversFromBytes parses, checks and resolves a config file's servers.
func serversFromBytes(b []byte, getenv func(string) string) (*parsedServers, error) {
	cf, err := parseConfig(b)
	if err != nil {
		return nil, err
	}
	ps := &parsedServers{loadedServers: loadedServers{flags: cf.Flags, sum: sha256.Sum256(b)}}
	if cf.Servers == nil {
		return ps, nil
	}
	if err := checkServers(*cf.Servers); err != nil {
		return nil, err
	}
	if ps.servers, err = resolveServers(*cf.Servers, getenv); err != nil {
		return nil, err
	}
	ps.list = *cf.Servers
	ps.literal, ps.files = headerSources(ps.list)
	return ps, nil
}

// configRunsCommands reports whether the config file at name lists a
// server run as a command (whose child could read Spillway's command
// line). A file that cannot be read or parsed says no here: it is refused
// where the servers are loaded.
func configRunsCommands(name string) bool {
	if name == "" {
		return false
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return false
	}
	cf, err := parseConfig(b)
	if err != nil || cf.Servers == nil {
		return false
	}
	for _, s := range *cf.Servers {
		if s.Command != "" {
			return true
		}
	}
	return false
}
