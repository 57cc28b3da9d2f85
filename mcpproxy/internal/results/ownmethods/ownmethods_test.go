package ownmethods

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/artifacttest"
	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/offload"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/schematest"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/policy"
	"github.com/spillway-dev/spillway/policy/policytest"
)

var ctx = context.Background()

// env is a real artifact service (fsstore, the built-in policy, the /a/
// endpoint on loopback) and Methods over it.
type env struct {
	svc  *artifact.Service
	m    *Methods
	logs *policytest.Buffer // what Methods logged
}

func newEnv(t testing.TB, store artifact.Store, o Options) *env {
	return newEnvPolicy(t, store, o, "")
}

// newEnvPolicy is newEnv with the Rego policy rego ("": the built-in
// one) deciding offloads, mints and fetches.
func newEnvPolicy(t testing.TB, store artifact.Store, o Options, rego string) *env {
	t.Helper()
	if store == nil {
		s, err := fsstore.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		store = s
	}
	po := policy.Options{Logger: slog.New(slog.DiscardHandler)}
	if rego != "" {
		po.Dir = t.TempDir()
		if err := os.WriteFile(filepath.Join(po.Dir, "policy.rego"), []byte(rego), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	eng, err := policy.New(ctx, po)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	svc, fetch := artifacttest.Serve(t, store, artifacttest.Options{Policy: eng})
	l := &policytest.Buffer{}
	o.Artifacts = svc
	if o.Fetch == nil {
		o.Fetch = fetch
	}
	o.Offloader = offload.New(svc, eng, offload.Options{TextThreshold: 100, Logger: slog.New(slog.DiscardHandler)})
	o.Logger = slog.New(slog.NewTextHandler(l, nil))
	return &env{svc: svc, m: New(o), logs: l}
}

// publish stores data as tenant's artifact.
func (e *env) publish(t testing.TB, tenant, mime string, data []byte) artifact.Artifact {
	return e.publishNamed(t, "out.txt", tenant, mime, data)
}

func (e *env) publishNamed(t testing.TB, name, tenant, mime string, data []byte) artifact.Artifact {
	t.Helper()
	a, _, err := e.svc.Publish(ctx, artifact.Artifact{Name: name, MimeType: mime, Tenant: tenant}, bytes.NewReader(data), artifact.LinkOptions{Tenant: tenant})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func request(t testing.TB, method string, params any) *jsonrpc.Message {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	m, err := jsonrpc.DecodeMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func response(t testing.TB, result string) *jsonrpc.Message {
	t.Helper()
	m, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":7,"result":` + result + `}`))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func errorResponse(code int) *jsonrpc.Message { return jsonrpc.ErrorResponse([]byte("7"), code, "x") }

// roundTrip passes a request through Before, and the upstream's answer
// through After.
func (e *env) roundTrip(t testing.TB, rq Request, method string, params any, upstream *jsonrpc.Message) *jsonrpc.Message {
	t.Helper()
	reply, c := e.m.Before(ctx, rq, request(t, method, params))
	if reply != nil {
		return reply
	}
	return e.m.After(ctx, c, upstream)
}

func errCode(m *jsonrpc.Message) int { return m.ErrorCode() }

// TestSmallResultPassesAsItIs: a tools/call result with nothing to
// offload comes back from After as the very response it was, not a copy
// with the same bytes, so a relay passes its event on as it came (and
// the result is not checked a second time). Before, After returned a
// copy for every result.
func TestSmallResultPassesAsItIs(t *testing.T) {
	e := newEnv(t, nil, Options{})
	up := response(t, `{"content":[{"type":"text","text":"ok"}]}`)
	if out := e.roundTrip(t, Request{Tenant: "t"}, "tools/call", map[string]any{"name": "echo"}, up); out != up {
		t.Errorf("After returned a new message %s for %s", out.Raw, up.Raw)
	}
}

// An upstream result that is not what the method returns (null, a
// number, capabilities that are not an object…) answers that request
// with an error. It used to panic the proxy (initialize and
// server/discover: an assignment into a nil map), killing the process on
// the stdio face.
func TestAfterInvalidResultIsAnError(t *testing.T) {
	e := newEnv(t, nil, Options{})
	e.m.Remember("", e.publish(t, "", "text/plain", []byte("hello"))) // resources/list has an item to add
	bad := []string{`null`, `1`, `"x"`, `[]`, `true`}
	cases := map[string][]string{
		"initialize":               append(bad, `{"capabilities":null}`, `{"capabilities":{"resources":[1]}}`, `{"capabilities":"x"}`),
		"server/discover":          append(bad, `{"capabilities":7}`, `{"capabilities":{"resources":null}}`),
		"resources/list":           append(bad, `{"resources":null}`, `{"resources":{"a":1}}`),
		"resources/templates/list": append(bad, `{"resourceTemplates":"x"}`),
		"tools/list":               bad,
	}
	for method, results := range cases {
		for _, res := range results {
			for _, stdio := range []bool{false, true} {
				got := e.roundTrip(t, Request{Stdio: stdio}, method, map[string]any{}, response(t, res))
				if errCode(got) != jsonrpc.CodeUpstream || !bytes.Contains(got.Raw, []byte(errInvalidResult)) || string(got.ID) != "7" {
					t.Errorf("%s answered %s: got %s, want a CodeUpstream error", method, res, got.Raw)
				}
			}
		}
	}
	if strings.Contains(e.logs.String(), "panicked") {
		t.Errorf("After panicked (and recovered):\n%s", e.logs)
	}
}

// What the proxy adds to initialize and server/discover: the resources
// capability, streaming only where the face can stream; everything the
// upstream sent is kept.
func TestInitializeCapabilities(t *testing.T) {
	e := newEnv(t, nil, Options{})
	up := `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"x-new":{}},"serverInfo":{"name":"u","version":"1"},"x-extra":[1]}`
	got := e.roundTrip(t, Request{}, "initialize", map[string]any{}, response(t, up))
	schematest.Check(t, "2025-11-25", "InitializeResult", got.Result)
	if s := jsonrpc.Path(got.Result, "capabilities", "resources", "stream"); string(s) != "true" {
		t.Errorf("HTTP face: resources.stream = %s in %s", s, got.Result)
	}
	for _, keep := range []string{`"x-extra":[1]`, `"x-new":{}`, `"listChanged":true`} {
		if !bytes.Contains(got.Result, []byte(keep)) {
			t.Errorf("lost %s: %s", keep, got.Result)
		}
	}
	got = e.roundTrip(t, Request{Stdio: true}, "initialize", map[string]any{}, response(t, up))
	if r := jsonrpc.Path(got.Result, "capabilities", "resources"); string(r) != "{}" {
		t.Errorf("stdio face: resources = %s, want {} (no stream over stdio)", r)
	}
	disc := `{"resultType":"complete","ttlMs":0,"cacheScope":"public","supportedVersions":["2026-07-28"],"capabilities":{"resources":{"subscribe":true,"stream":true}},"serverInfo":{"name":"u","version":"1"}}`
	got = e.roundTrip(t, Request{Version: Version20260728}, "server/discover", map[string]any{}, response(t, disc))
	schematest.Check(t, Version20260728, "DiscoverResult", got.Result)
	if !e.m.StreamCaps(Request{}, request(t, "resources/stream", map[string]any{})).Upstream {
		t.Error("the upstream declared resources.stream; StreamCaps says it did not")
	}
	if r := jsonrpc.Path(got.Result, "capabilities", "resources"); string(r) != `{"subscribe":true,"stream":true}` {
		t.Errorf("discover: resources = %s", r)
	}
}

// resources/read of an artifact: the caller's own bytes, as a result
// valid in its revision. 2026-07-28 requires resultType, ttlMs and
// cacheScope of a resources/read result; they were missing, so the
// TypeScript SDK v2 and the Inspector rejected it.
func TestReadArtifactSchemaValid(t *testing.T) {
	e := newEnv(t, nil, Options{})
	text := e.publish(t, "acme", "application/json", []byte(`{"rows":[1,2,3]}`))
	bin := e.publish(t, "acme", "image/png", []byte{0x89, 'P', 'N', 'G', 0xff})
	for _, version := range []string{"2025-11-25", Version20260728} {
		for _, viaMeta := range []bool{false, true} {
			rq := Request{Tenant: "acme", Version: version}
			params := map[string]any{"uri": artifact.URI(text.ID)}
			if viaMeta {
				rq.Version = "" // the stateless era names its revision in _meta
				params["_meta"] = map[string]any{jsonrpc.MetaProtocolVersion: version}
			}
			got := e.roundTrip(t, rq, "resources/read", params, nil)
			schematest.Check(t, version, "ReadResourceResult", got.Result)
			if !bytes.Contains(got.Result, []byte(`"text":"{\"rows\":[1,2,3]}"`)) {
				t.Errorf("%s: %s", version, got.Result)
			}
			if version == Version20260728 && !bytes.Contains(got.Result, []byte(`"resultType":"complete"`)) {
				t.Errorf("%s (meta %v): no resultType: %s", version, viaMeta, got.Result)
			}
			params["uri"] = artifact.URI(bin.ID)
			got = e.roundTrip(t, rq, "resources/read", params, nil)
			schematest.Check(t, version, "ReadResourceResult", got.Result)
			if !bytes.Contains(got.Result, []byte(`"blob":"iVBOR/8="`)) {
				t.Errorf("%s: binary: %s", version, got.Result)
			}
		}
	}
	e2 := newEnv(t, nil, Options{MaxInlineRead: 3})
	big := e2.publish(t, "", "text/plain", []byte("four"))
	if got := e2.roundTrip(t, Request{}, "resources/read", map[string]any{"uri": artifact.URI(big.ID)}, nil); errCode(got) != jsonrpc.CodeInvalidParams {
		t.Errorf("over MaxInlineRead: %s", got.Raw)
	}
}

// The first page of resources/list and resources/templates/list gets the
// proxy's items, valid in both eras (answering alone for an upstream
// without the method); later pages are the upstream's.
func TestListsFirstPageSchemaValid(t *testing.T) {
	e := newEnv(t, nil, Options{})
	a := e.publish(t, "acme", "text/csv", []byte("a,b\n1,2\n"))
	e.m.Remember("acme", a)
	rq := Request{Tenant: "acme"}
	for _, version := range []string{"2025-11-25", Version20260728} {
		rq.Version = version
		upstreams := []*jsonrpc.Message{errorResponse(jsonrpc.CodeMethodNotFound),
			response(t, `{"resources":[{"uri":"file:///x","name":"x"}],"nextCursor":"p2"}`)}
		if version == Version20260728 {
			upstreams[1] = response(t, `{"resultType":"complete","ttlMs":60000,"cacheScope":"public","resources":[{"uri":"file:///x","name":"x"}],"nextCursor":"p2"}`)
		}
		for _, up := range upstreams {
			got := e.roundTrip(t, rq, "resources/list", map[string]any{}, up)
			schematest.Check(t, version, "ListResourcesResult", got.Result)
			if !bytes.Contains(got.Result, []byte(artifact.URI(a.ID))) {
				t.Errorf("%s: the artifact is not listed: %s", version, got.Result)
			}
			if version == Version20260728 && !bytes.Contains(got.Result, []byte(`"cacheScope":"private"`)) {
				t.Errorf("%s: a list with the caller's artifacts must not be cached across callers: %s", version, got.Result)
			}
			got = e.roundTrip(t, rq, "resources/templates/list", map[string]any{}, up)
			if up.Error == nil {
				continue // a resources/list result is no templates list
			}
			schematest.Check(t, version, "ListResourceTemplatesResult", got.Result)
			if !bytes.Contains(got.Result, []byte(`spillway://artifacts/{id}`)) {
				t.Errorf("%s: no template: %s", version, got.Result)
			}
		}
		// Not the first page: the upstream's answer, untouched.
		up := response(t, `{"resources":[]}`)
		if got := e.roundTrip(t, rq, "resources/list", map[string]any{"cursor": "p2"}, up); !bytes.Equal(got.Raw, up.Raw) {
			t.Errorf("page 2 changed: %s", got.Raw)
		}
		if got := e.roundTrip(t, rq, "resources/templates/list", map[string]any{"cursor": "p2"}, up); !bytes.Equal(got.Raw, up.Raw) {
			t.Errorf("templates page 2 changed: %s", got.Raw)
		}
	}
	// Other errors pass.
	if got := e.roundTrip(t, rq, "resources/list", map[string]any{}, errorResponse(-32000)); errCode(got) != -32000 {
		t.Errorf("an upstream error changed: %s", got.Raw)
	}
}

// One access rule for resources/read, resources/list and
// resources/stream: exactly the tenant rule of the /a/ endpoint. A
// tenant-less artifact used to be readable by every tenant through
// resources/read, and deleted artifacts stayed listed.
func TestAccessRuleTenants(t *testing.T) {
	e := newEnv(t, nil, Options{StreamMode: StreamDownload})
	own := e.publish(t, "a", "text/plain", []byte("a's"))
	none := e.publish(t, "", "text/plain", []byte("nobody's"))
	gone := e.publish(t, "a", "text/plain", []byte("deleted"))
	if err := e.svc.Delete(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"a", "b", ""} {
		for _, a := range []artifact.Artifact{own, none, gone} {
			e.m.Remember(tenant, a)
		}
	}
	for _, tc := range []struct {
		tenant string
		a      artifact.Artifact
		ok     bool
	}{
		{"a", own, true}, {"b", own, false}, {"", own, false},
		{"", none, true}, {"a", none, false}, {"b", none, false},
		{"a", gone, false},
	} {
		rq := Request{Tenant: tc.tenant}
		uri := artifact.URI(tc.a.ID)
		got := e.roundTrip(t, rq, "resources/read", map[string]any{"uri": uri}, nil)
		if ok := got.Error == nil; ok != tc.ok || (!ok && errCode(got) != CodeResourceNotFound) {
			t.Errorf("tenant %q reads %s's artifact: %s", tc.tenant, tc.a.Tenant, got.Raw)
		}
		list := e.roundTrip(t, rq, "resources/list", map[string]any{}, errorResponse(jsonrpc.CodeMethodNotFound))
		if listed := bytes.Contains(list.Result, []byte(uri)); listed != tc.ok {
			t.Errorf("tenant %q lists %s's artifact: %v (%s)", tc.tenant, tc.a.Tenant, listed, list.Result)
		}
		w := serveStream(t, e.m, rq, uri, StreamCaps{Client: true})
		if ok := !bytes.Contains(w.Body.Bytes(), []byte(`"error"`)); ok != tc.ok || (!ok && !bytes.Contains(w.Body.Bytes(), []byte(`-32002`))) {
			t.Errorf("tenant %q streams %s's artifact: %s", tc.tenant, tc.a.Tenant, w.Body)
		}
	}
}

// A tools/call result is offloaded for the caller's tenant, and listed
// for it alone; a result withheld by FailClosed is an error.
func TestOffloadedResultsAreListedForTheirTenant(t *testing.T) {
	e := newEnv(t, nil, Options{})
	big := fmt.Sprintf(`{"content":[{"type":"text","text":%q}]}`, strings.Repeat("row\n", 100))
	got := e.roundTrip(t, Request{Tenant: "a"}, "tools/call", map[string]any{"name": "q"}, response(t, big))
	if !bytes.Contains(got.Result, []byte(`"resource_link"`)) {
		t.Fatalf("not offloaded: %s", got.Result)
	}
	var r struct{ Content []struct{ Type, URI string } }
	json.Unmarshal(got.Result, &r)
	if len(r.Content) != 2 || r.Content[1].Type != "resource_link" {
		t.Fatalf("offloaded result: %s", got.Result)
	}
	uri := r.Content[1].URI
	for tenant, want := range map[string]bool{"a": true, "b": false} {
		list := e.roundTrip(t, Request{Tenant: tenant}, "resources/list", map[string]any{}, response(t, `{"resources":[]}`))
		if listed := bytes.Contains(list.Result, []byte(uri)); listed != want {
			t.Errorf("tenant %s lists %s: %v", tenant, uri, listed)
		}
	}
}
