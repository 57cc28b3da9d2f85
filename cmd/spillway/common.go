package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/artifact/s3store"
	"github.com/spillway-dev/spillway/artifact/token"
	"github.com/spillway-dev/spillway/policy"
)

// storeFlags are shared by every command that opens the store.
type storeFlags struct {
	config        string
	data          string
	store         string
	keyFile       string
	signingKeys   string
	storeSecret   string
	publicURL     string
	policyDir     string
	bundleKey     string
	bundleKeyID   string
	bundleAlg     string
	dryRun        string
	decisionLog   string
	policyTimeout time.Duration
	defaultTTL    time.Duration
	maxTTL        time.Duration
	logLevel      string
	logFormat     string
}

func (f *storeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "", "YAML config `file` (keys are flag names)")
	fs.StringVar(&f.data, "data", defaultDataDir(), "data `dir`: local artifacts and the generated signing key")
	fs.StringVar(&f.store, "store", "", "artifact store: a `DIR` or s3://BUCKET[/PREFIX]?endpoint=HOST:PORT&secure=false (default DATA/artifacts)")
	fs.StringVar(&f.keyFile, "key-file", "", "signing key `file` of id:base64secret lines, the first signing, created if missing and reloaded every second (mode 0600; default DATA/signing.keys)")
	fs.StringVar(&f.signingKeys, "signing-keys", "", "signing `keys` id:base64secret,..., the first signing, instead of --key-file (not on the command line with --upstream-cmd)")
	fs.StringVar(&f.storeSecret, "store-secret-file", "", "`file` holding the S3 secret access key (mode 0600), instead of AWS_SECRET_ACCESS_KEY")
	fs.StringVar(&f.publicURL, "public-url", "", "base `URL` of links handed out (default http://LISTEN)")
	fs.StringVar(&f.policyDir, "policy", "", "Rego policy `dir` or bundle .tar.gz (default: the built-in policy)")
	fs.StringVar(&f.bundleKey, "policy-bundle-key", "", "verify the --policy bundle's signature with this public key (PEM) or secret `file`")
	fs.StringVar(&f.bundleKeyID, "policy-bundle-key-id", "default", "key `id` the bundle's signature names")
	fs.StringVar(&f.bundleAlg, "policy-bundle-alg", "RS256", "signature `algorithm` of the bundle (RS256, ES256, HS256, ...)")
	fs.StringVar(&f.dryRun, "policy-dry-run", "", "candidate policy `dir` evaluated beside the enforced one; disagreements are logged, not enforced")
	fs.StringVar(&f.decisionLog, "decision-log", "", "write policy decisions as JSON lines to `file` (- for stdout)")
	fs.DurationVar(&f.policyTimeout, "policy-timeout", policy.DefaultDecisionTimeout, "longest one policy decision (offload, mint, fetch, call) may take before it denies")
	fs.DurationVar(&f.defaultTTL, "default-ttl", 15*time.Minute, "lifetime of links and artifacts when none is asked for")
	fs.DurationVar(&f.maxTTL, "max-ttl", time.Hour, "longest lifetime any link or artifact gets")
	fs.StringVar(&f.logLevel, "log-level", "info", "log `level`: debug, info, warn, error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log `format`: text or json")
}

func defaultDataDir() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "spillway")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "spillway")
	}
	return "spillway-data"
}

func (f *storeFlags) logger(w io.Writer) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	o := &slog.HandlerOptions{Level: lvl}
	switch f.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, o)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, o)), nil
	}
	return nil, fmt.Errorf("--log-format: %q is neither text nor json", f.logFormat)
}

// deps are what the flags open; close releases them.
type deps struct {
	svc     *artifact.Service
	engine  *policy.Engine
	keyFile string // the signing keys' file, to watch; "" when they came from --signing-keys
	close   []func() error

	// registry is what /metrics serves: the Go runtime, the process, svc's
	// Metrics and the engine; other parts register their own collectors
	// on it before the server starts (see newRegistry).
	registry *prometheus.Registry
}

func (d *deps) Close() error {
	var errs []error
	for i := len(d.close) - 1; i >= 0; i-- {
		errs = append(errs, d.close[i]())
	}
	return errors.Join(errs...)
}

// open builds the store, signer, policy engine and service. fallbackURL
// is the base for links when --public-url is not set.
func (f *storeFlags) open(ctx context.Context, log *slog.Logger, stdout io.Writer, fallbackURL string) (*deps, error) {
	d := &deps{}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	store, err := f.openStore(ctx)
	if err != nil {
		return nil, err
	}
	keys, keyFile, err := f.keys()
	if err != nil {
		return nil, err
	}
	d.keyFile = keyFile
	signer, err := token.NewSigner(keys[0], keys[1:]...)
	if err != nil {
		return nil, err
	}
	u, err := f.linkBase(fallbackURL)
	if err != nil {
		return nil, err
	}
	if d.engine, err = f.openPolicy(ctx, log, stdout, d); err != nil {
		return nil, err
	}
	d.svc = &artifact.Service{
		Store:      store,
		Signer:     signer,
		PublicURL:  u,
		Mint:       d.engine,
		Fetch:      d.engine,
		Cache:      artifact.NewCache(artifact.CacheOptions{}),
		Metrics:    &artifact.Metrics{},
		DefaultTTL: f.defaultTTL,
		MaxTTL:     f.maxTTL,
	}
	d.registry = newRegistry(d.svc.Metrics, d.engine)
	ok = true
	return d, nil
}

// linkBase is the base URL of links: --public-url, else fallbackURL.
func (f *storeFlags) linkBase(fallbackURL string) (*url.URL, error) {
	pub := f.publicURL
	if pub == "" {
		pub = fallbackURL
	}
	u, err := url.Parse(pub)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("--public-url %q: want an absolute http(s) URL without query", pub)
	}
	return u, nil
}

// openPolicy starts the policy engine, writing its decision log to a file
// or stdout; what it opens is closed by d.Close.
func (f *storeFlags) openPolicy(ctx context.Context, log *slog.Logger, stdout io.Writer, d *deps) (*policy.Engine, error) {
	if f.policyTimeout <= 0 {
		return nil, errors.New("--policy-timeout: want a positive duration")
	}
	// The key goes to the engine whatever --policy is: it refuses a key it
	// cannot enforce instead of ignoring it.
	po := policy.Options{Logger: log, Candidate: f.dryRun, DecisionTimeout: f.policyTimeout,
		BundleKey: f.bundleKey, BundleKeyID: f.bundleKeyID, BundleAlg: f.bundleAlg}
	if isBundle(f.policyDir) {
		po.Bundle = f.policyDir
	} else {
		po.Dir = f.policyDir
	}
	switch f.decisionLog {
	case "":
	case "-":
		po.DecisionLog = stdout
	default:
		lf, err := os.OpenFile(f.decisionLog, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("--decision-log: %w", err)
		}
		d.close = append(d.close, lf.Close)
		po.DecisionLog = lf
	}
	engine, err := policy.New(ctx, po)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	d.close = append(d.close, engine.Close)
	return engine, nil
}

// isBundle reports whether --policy names a bundle file rather than a
// folder of Rego files.
func isBundle(p string) bool {
	if p == "" {
		return false
	}
	if fi, err := os.Stat(p); err == nil {
		return fi.Mode().IsRegular()
	}
	return strings.HasSuffix(p, ".tar.gz")
}

func (f *storeFlags) openStore(ctx context.Context) (artifact.Store, error) {
	if strings.HasPrefix(f.store, "s3://") {
		o, err := s3store.ParseURL(f.store)
		if err != nil {
			return nil, fmt.Errorf("--store: %w", err)
		}
		if f.storeSecret != "" {
			b, err := token.ReadSecretFile(f.storeSecret)
			if err != nil {
				return nil, fmt.Errorf("--store-secret-file: %w", err)
			}
			o.SecretKey = strings.TrimSpace(string(b))
		}
		return s3store.New(ctx, o)
	}
	dir := f.store
	if dir == "" {
		dir = filepath.Join(f.data, "artifacts")
	}
	return fsstore.New(dir)
}

// keys returns the signing keys and the file they came from ("" for
// --signing-keys).
func (f *storeFlags) keys() ([]token.Key, string, error) {
	if f.signingKeys != "" {
		keys, err := token.ParseKeys(f.signingKeys)
		return keys, "", err
	}
	path := f.keyFile
	if path == "" {
		path = filepath.Join(f.data, "signing.keys")
	}
	keys, err := token.LoadOrCreateKeyFile(path)
	return keys, path, err
}
