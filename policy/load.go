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
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/cover"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

//go:embed default/*.rego
var defaultFS embed.FS

// source is one loaded policy: modules (tests included) and data.
type source struct {
	modules  map[string]*ast.Module
	store    storage.Store
	revision string
	digest   string // of the modules and data: what is enforced, whatever the revision says
	builtin  bool   // the embedded policy, unchanged: builtinFetch may decide for it
	// definesCall is whether the policy defines data.spillway.call at all
	// (see definesCall); a policy that does not allows every call.
	definesCall bool
}

// load reads the built-in policy, a folder (all .rego files and
// data.json/data.yaml documents under it) or a bundle, vets its modules and
// fixes its digest and revision.
func load(dir, bundlePath string, o Options) (*source, error) {
	var (
		s    *source
		data map[string]any
		err  error
	)
	switch {
	case bundlePath != "":
		s, data, err = readBundle(bundlePath, o)
	case dir != "":
		s, data, err = readDir(dir)
	default:
		s, err = readBuiltin()
	}
	if err != nil {
		return nil, err
	}
	if o.afterRead != nil {
		o.afterRead()
	}
	if len(s.modules) == 0 {
		return nil, errors.New("no .rego files")
	}
	if err := vet(s.modules); err != nil {
		if dir != "" {
			err = fmt.Errorf("%s: %w", dir, err) // module names are relative to it
		}
		return nil, err
	}
	if data == nil {
		data = map[string]any{}
	}
	s.store = inmem.NewFromObject(data)
	s.definesCall = definesCall(s.modules, data)
	s.digest = digest(s.modules, data)
	if s.revision == "" {
		s.revision = s.digest[:16]
	}
	return s, nil
}

// readBundle reads an OPA bundle, checking its signature first when
// o.BundleKey is set. The bundle's manifest names its revision.
func readBundle(bundlePath string, o Options) (*source, map[string]any, error) {
	fl := loader.NewFileLoader()
	if o.BundleKey != "" {
		vc, err := verification(o)
		if err != nil {
			return nil, nil, err
		}
		fl = fl.WithBundleVerificationConfig(vc)
	}
	b, err := fl.AsBundle(bundlePath)
	if err != nil {
		return nil, nil, err
	}
	s := &source{modules: map[string]*ast.Module{}, revision: b.Manifest.Revision}
	for _, m := range b.Modules {
		s.modules[m.Path] = m.Parsed
	}
	return s, b.Data, nil
}

// verification is the signature check for a bundle signed with the key in
// o.BundleKey, named o.BundleKeyID ("default" if empty), of algorithm
// o.BundleAlg (RS256 if empty).
func verification(o Options) (*bundle.VerificationConfig, error) {
	id := o.BundleKeyID
	if id == "" {
		id = "default"
	}
	alg := o.BundleAlg
	if alg == "" {
		alg = "RS256"
	}
	key, err := os.ReadFile(o.BundleKey)
	if err != nil {
		return nil, fmt.Errorf("bundle key: %w", err)
	}
	return bundle.NewVerificationConfig(map[string]*bundle.KeyConfig{id: {Key: string(key), Algorithm: alg}}, id, "", nil), nil
}

// readDir reads a policy folder through an os.Root, by the rules of
// skipEntry; every entry those rules refuse is named in the error.
func readDir(dir string) (*source, map[string]any, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	var odd []string
	res, err := loader.NewFileLoader().WithFS(root.FS()).Filtered([]string{"."}, func(p string, info fs.FileInfo, depth int) bool {
		skip, bad := skipEntry(p, info, depth)
		if bad != nil {
			odd = append(odd, bad.Error())
		}
		return skip
	})
	if len(odd) > 0 {
		return nil, nil, fmt.Errorf("%s: %s", dir, strings.Join(odd, "; "))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	s := &source{modules: map[string]*ast.Module{}}
	for name, m := range res.Modules {
		s.modules[name] = m.Parsed
	}
	return s, res.Documents, nil
}

// readBuiltin parses the policy embedded in the binary (default/*.rego),
// which has no data.
func readBuiltin() (*source, error) {
	s := &source{modules: map[string]*ast.Module{}, builtin: true}
	err := fs.WalkDir(defaultFS, "default", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := defaultFS.ReadFile(p)
		if err != nil {
			return err
		}
		m, err := ast.ParseModuleWithOpts(p, string(b), ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return err
		}
		s.modules[p] = m
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// digest is the SHA-256, in hex, of the modules (by name, in name order)
// and the data: what is enforced, whatever revision the policy claims.
func digest(modules map[string]*ast.Module, data map[string]any) string {
	h := sha256.New()
	names := make([]string, 0, len(modules))
	for n := range modules {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h.Write([]byte(n + "\x00" + modules[n].String() + "\x00"))
	}
	db, _ := json.Marshal(data)
	h.Write(db)
	return hex.EncodeToString(h.Sum(nil))
}

// test runs the policy's own Rego tests; any failure refuses the policy.
func (s *source) test(ctx context.Context) error {
	rep, err := s.runTests(ctx, nil)
	if err != nil {
		return fmt.Errorf("tests: %w", err)
	}
	if failed := rep.Failed(); len(failed) > 0 {
		return fmt.Errorf("%d of %d Rego tests fail: %s", len(failed), len(rep.Results), strings.Join(failed, ", "))
	}
	return nil
}

// runTests runs the policy's Rego tests and reports each result, with
// coverage when cov is set.
func (s *source) runTests(ctx context.Context, cov *cover.Cover) (TestReport, error) {
	r := newTestRunner(s.store)
	if cov != nil {
		r = r.SetCoverageQueryTracer(cov)
	}
	ch, err := r.SetModules(s.modules).RunTests(ctx, nil)
	if err != nil {
		return TestReport{}, err
	}
	var rep TestReport
	for res := range ch {
		rep.Results = append(rep.Results, res)
	}
	if cov != nil {
		c := cov.Report(s.modules)
		rep.Coverage = &c
	}
	return rep, nil
}

// definesMask reports whether a module defines data.system.log.mask.
func (s *source) definesMask() bool {
	for _, m := range s.modules {
		if m.Package.Path.String() != "data.system.log" {
			continue
		}
		for _, r := range m.Rules {
			if r.Head.Name.String() == "mask" || (len(r.Head.Reference) > 0 && r.Head.Reference[0].Value.String() == "mask") {
				return true
			}
		}
	}
	return false
}

// callPath is data.spillway.call, the call decision's document.
var callPath = ast.MustParseRef("data.spillway.call")

// definesCall reports whether the policy defines data.spillway.call in any
// way: a rule named call (or call.x, call[k]) in package spillway, a
// package at or below spillway.call, or a data document at spillway.call.
// A policy written before the call decision existed defines none of them.
func definesCall(modules map[string]*ast.Module, data map[string]any) bool {
	for _, m := range modules {
		pkg := m.Package.Path
		if pkg.HasPrefix(callPath) {
			return true
		}
		if !pkg.Equal(callPath[:len(callPath)-1]) {
			continue
		}
		for _, r := range m.Rules {
			if ref := r.Head.Ref(); len(ref) > 0 && ref[0].Equal(ast.VarTerm("call")) {
				return true
			}
		}
	}
	sp, _ := data["spillway"].(map[string]any)
	_, ok := sp["call"]
	return ok
}

// skipEntry reports whether the loader and fingerprint skip the entry p
// (info, depth folders below the top), and the error that refuses the
// folder when there is one.
//
// A policy folder is read through an os.Root: a symlink is followed only
// while it stays inside the folder (a Kubernetes ConfigMap volume links
// each file into its hidden ..data folder), and one that leaves it fails
// the load, so a folder assembled from a less trusted source (a checkout,
// an unpacked archive) cannot pull a host file into data. skipEntry is
// the rest of the rule: hidden entries below the top are skipped (..data
// and its timestamped target are reached through the visible links), and
// anything that is neither a folder nor a regular file (a named pipe, a
// device, which would block or never end) is an error, as is a folder
// nested deeper than maxDepth (a link to one of its own parents).
func skipEntry(p string, info fs.FileInfo, depth int) (skip bool, err error) {
	switch {
	case depth > 0 && strings.HasPrefix(info.Name(), "."):
		return true, nil
	case depth > maxDepth:
		return true, fmt.Errorf("%s: nested more than %d folders deep (a link to a parent?)", p, maxDepth)
	case !info.IsDir() && !info.Mode().IsRegular():
		return true, fmt.Errorf("%s: not a regular file (%s)", p, info.Mode().Type())
	}
	return false, nil
}

// maxDepth is how deep a policy folder may nest folders (see skipEntry).
const maxDepth = 32

// fingerprint changes when any file of the policy changes: names and
// contents (not modification times, which a copy or a reproducible build
// can keep), cheap enough to poll every second for a policy's size. It
// reads a folder by the loader's rules (see skipEntry). On error the
// fingerprint covers the error too, so an unchanged broken folder is not
// loaded (and refused) again on every poll.
func fingerprint(dir, bundlePath string) (string, error) {
	if dir == "" && bundlePath == "" {
		return "built-in", nil
	}
	h := sha256.New()
	var err error
	if bundlePath != "" {
		err = hashFile(h, os.DirFS(filepath.Dir(bundlePath)), filepath.Base(bundlePath))
	} else {
		var root *os.Root
		if root, err = os.OpenRoot(dir); err == nil {
			err = hashTree(h, root.FS(), ".", 0)
			root.Close()
		}
		if err != nil {
			err = fmt.Errorf("%s: %w", dir, err)
		}
	}
	if err != nil {
		fmt.Fprintf(h, "\x00error\x00%v", err)
	}
	return hex.EncodeToString(h.Sum(nil)), err
}

// hashTree hashes the folder p of fsys as the loader would read it,
// following links to folders (as the loader does) in name order.
func hashTree(h io.Writer, fsys fs.FS, p string, depth int) error {
	info, err := fs.Stat(fsys, p) // follows links: ConfigMaps swap a symlink
	if err != nil {
		return err
	}
	if skip, err := skipEntry(p, info, depth); skip || err != nil {
		return err
	}
	if !info.IsDir() {
		return hashFile(h, fsys, p)
	}
	entries, err := fs.ReadDir(fsys, p)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := hashTree(h, fsys, path.Join(p, e.Name()), depth+1); err != nil {
			return err
		}
	}
	return nil
}

// hashFile hashes a regular file's name, size and contents; it is
// checked before it is opened, since opening a named pipe blocks.
func hashFile(h io.Writer, fsys fs.FS, p string) error {
	info, err := fs.Stat(fsys, p)
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file (%s)", p, info.Mode().Type())
	}
	f, err := fsys.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fmt.Fprintf(h, "%s\x00%d\x00", p, info.Size())
	_, err = io.Copy(h, f)
	return err
}

// maskedHeaders are removed from every logged input whatever the policy
// says: credentials never reach the decision log.
var maskedHeaders = []string{"authorization", "cookie", "proxy-authorization", "x-api-key"}

// mask removes credentials from a decision log entry, then whatever the
// policy's data.system.log.mask lists: a set of JSON pointers into the
// entry, e.g. "/input/request/headers/x-secret" (as OPA's own
// system.log.mask does).
func mask(ctx context.Context, c *compiled, entry map[string]any) {
	if in, ok := entry["input"].(map[string]any); ok {
		if req, ok := in["request"].(map[string]any); ok {
			if h, ok := req["headers"].(map[string]any); ok {
				for _, k := range maskedHeaders {
					delete(h, k)
				}
			}
		}
	}
	if c.mask == nil {
		return
	}
	raw, err := evalOne(ctx, *c.mask, goInput{entry})
	if err != nil {
		entry["mask_error"] = err.Error()
		return
	}
	var ptrs []string
	if json.Unmarshal(raw, &ptrs) != nil {
		return
	}
	for _, p := range ptrs {
		removePointer(entry, p)
	}
}

// removePointer deletes the member a JSON pointer names.
func removePointer(doc map[string]any, ptr string) {
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	var cur any = doc
	for i, p := range parts {
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return
		}
		if i == len(parts)-1 {
			delete(m, p)
			return
		}
		cur = m[p]
	}
}
