package ownmethods

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/schematest"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// serveStream posts resources/stream of uri to m.ServeStream.
func serveStream(t testing.TB, m *Methods, rq Request, uri string, caps StreamCaps) *httptest.ResponseRecorder {
	t.Helper()
	msg := request(t, "resources/stream", map[string]any{"uri": uri})
	r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(msg.Raw))
	w := httptest.NewRecorder()
	if !m.ServeStream(w, r, rq, msg, caps) {
		t.Fatalf("resources/stream of %s was not handled", uri)
	}
	return w
}

// resources/stream of a spillway:// artifact URI that names nothing is
// -32002 (not found), malformed id or not; it used to be -32003 (not
// streamable) when the id was malformed.
func TestStreamUnknownArtifactIsNotFound(t *testing.T) {
	e := newEnv(t, nil, Options{})
	caps := StreamCaps{Client: true}
	for _, uri := range []string{artifact.URIPrefix + "nope", artifact.URIPrefix, artifact.URI(artifact.NewID())} {
		w := serveStream(t, e.m, Request{}, uri, caps)
		if !bytes.Contains(w.Body.Bytes(), []byte(`"code":-32002`)) || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s: %s", uri, w.Body)
		}
		// resources/read too: the URI is the proxy's, never the upstream's.
		if got := e.roundTrip(t, Request{}, "resources/read", map[string]any{"uri": uri}, nil); errCode(got) != CodeResourceNotFound {
			t.Errorf("read %s: %s", uri, got.Raw)
		}
	}
	// An upstream resource: the upstream's when it streams, else -32003.
	msg := request(t, "resources/stream", map[string]any{"uri": "file:///etc/hosts"})
	if e.m.ServeStream(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", nil), Request{}, msg, StreamCaps{Client: true, Upstream: true}) {
		t.Error("an upstream that streams did not get its own resource")
	}
	if w := serveStream(t, e.m, Request{}, "file:///etc/hosts", caps); !bytes.Contains(w.Body.Bytes(), []byte(`"code":-32003`)) {
		t.Errorf("upstream resource, upstream not streaming: %s", w.Body)
	}
	// Without the client capability: an error, no bytes.
	a := e.publish(t, "", "text/plain", []byte("x"))
	if w := serveStream(t, e.m, Request{}, artifact.URI(a.ID), StreamCaps{}); !bytes.Contains(w.Body.Bytes(), []byte(`"code":-32600`)) {
		t.Errorf("no resourceStreaming: %s", w.Body)
	}
	// Over stdio: resources/stream is for HTTP.
	if reply, _ := e.m.Before(ctx, Request{Stdio: true}, msg); reply == nil || errCode(reply) != CodeNotStreamable {
		t.Errorf("stdio: %v", reply)
	}
}

// Every mode delivers the caller's bytes: direct through the fetch
// endpoint, download as a result (valid in its revision) with a link,
// redirect (S3) as a storage URL; maxStreamSize is enforced first.
func TestStreamModes(t *testing.T) {
	data := make([]byte, 1<<20)
	rand.Read(data)
	stores := map[string]artifact.Store{"fs": nil, "minio": miniotest.Start(t).Store(t)}
	for name, store := range stores {
		for _, mode := range []string{StreamDirect, StreamRedirect, StreamDownload} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				e := newEnv(t, store, Options{StreamMode: mode})
				a := e.publish(t, "acme", "application/octet-stream", data)
				uri := artifact.URI(a.ID)
				rq := Request{Tenant: "acme", Version: Version20260728}
				if w := serveStream(t, e.m, rq, uri, StreamCaps{Client: true, Max: 1000}); !bytes.Contains(w.Body.Bytes(), []byte(`"code":-32004`)) {
					t.Errorf("maxStreamSize: %.300s", w.Body)
				}
				w := serveStream(t, e.m, rq, uri, StreamCaps{Client: true})
				var body io.Reader = w.Body
				switch {
				case mode == StreamDownload:
					resp, err := jsonrpc.DecodeMessage(w.Body.Bytes())
					if err != nil || resp.Result == nil {
						t.Fatalf("download: %s", w.Body)
					}
					if jsonrpc.StringMember(resp.Result, "resultType") != "complete" {
						t.Errorf("download result lacks resultType: %s", resp.Result)
					}
					schematest.Check(t, Version20260728, "Result", resp.Result)
					body = get(t, jsonrpc.StringMember(resp.Result, "downloadUrl"))
				case mode == StreamRedirect && name == "minio":
					if w.Code != http.StatusFound {
						t.Fatalf("redirect: %d %s", w.Code, w.Body)
					}
					body = get(t, w.Header().Get("Location"))
				default: // direct, and redirect on a store that cannot presign
					if w.Code != http.StatusOK || w.Header().Get("MCP-Resource-Uri") != uri {
						t.Fatalf("direct: %d %v", w.Code, w.Header())
					}
				}
				got, _ := io.ReadAll(body)
				if !bytes.Equal(got, data) {
					t.Errorf("got %d bytes, want the artifact's %d", len(got), len(data))
				}
			})
		}
	}
}

func get(t testing.TB, url string) io.Reader {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", url, resp.Status, b)
	}
	return bytes.NewReader(b)
}

// StreamCaps: a session's from its initialize, a stateless request's
// from its _meta.
func TestStreamCaps(t *testing.T) {
	e := newEnv(t, nil, Options{})
	init := request(t, "initialize", map[string]any{"capabilities": map[string]any{"resourceStreaming": map[string]any{"maxStreamSize": 5}}})
	e.m.Initialized("s1", init)
	e.m.Initialized("s2", request(t, "initialize", map[string]any{"capabilities": map[string]any{}}))
	m := request(t, "resources/stream", map[string]any{"uri": "x"})
	if c := e.m.StreamCaps(Request{Session: "s1", Version: "2025-11-25"}, m); !c.Client || c.Max != 5 {
		t.Errorf("s1: %+v", c)
	}
	if c := e.m.StreamCaps(Request{Session: "s2", Version: "2025-11-25"}, m); c.Client {
		t.Errorf("s2: %+v", c)
	}
	e.m.Ended("s1")
	if c := e.m.StreamCaps(Request{Session: "s1", Version: "2025-11-25"}, m); c.Client {
		t.Errorf("s1 after Ended: %+v", c)
	}
	meta := request(t, "resources/stream", map[string]any{"uri": "x", "_meta": map[string]any{
		jsonrpc.MetaProtocolVersion:    Version20260728,
		jsonrpc.MetaClientCapabilities: map[string]any{"resourceStreaming": map[string]any{}},
	}})
	if c := e.m.StreamCaps(Request{}, meta); !c.Client || c.Max != 0 || string(c.Raw) != `{"resourceStreaming":{}}` {
		t.Errorf("stateless: %+v", c)
	}
	if c := e.m.StreamCaps(Request{Session: "s2", Version: "2025-11-25"}, m); string(c.Raw) != `{}` {
		t.Errorf("s2's capabilities: %s", c.Raw)
	}
	b, _ := json.Marshal(e.m.StreamCaps(Request{}, m))
	if string(b) != `{"Client":false,"Max":0,"Upstream":false,"Raw":null}` {
		t.Errorf("nothing declared: %s", b)
	}
}

// Options.Declare: a capability it returns is added to initialize and
// server/discover results for the client that declared its own, and
// nothing is added when it returns none (the result's bytes unchanged).
func TestDeclare(t *testing.T) {
	e := newEnv(t, nil, Options{Declare: func(client []byte) map[string][]byte {
		if jsonrpc.RawMember(client, "streams") == nil {
			return nil
		}
		return map[string][]byte{"streams": []byte(`{"resumeInterval":{"min":1,"max":2}}`), "experimental": []byte(`{"x":1}`)}
	}})
	declared := map[string]any{"capabilities": map[string]any{"streams": map[string]any{}}}
	discover := map[string]any{"_meta": map[string]any{
		jsonrpc.MetaProtocolVersion: Version20260728, jsonrpc.MetaClientCapabilities: map[string]any{"streams": map[string]any{}}}}
	for _, tc := range []struct {
		name, method string
		params       map[string]any
		want         string // capabilities.streams
	}{
		{"initialize, declared", "initialize", declared, `{"resumeInterval":{"min":1,"max":2}}`},
		{"initialize, not declared", "initialize", map[string]any{"capabilities": map[string]any{}}, ``},
		{"discover, declared", "server/discover", discover, `{"resumeInterval":{"min":1,"max":2}}`},
		{"discover, declared in params", "server/discover", declared, ``},
	} {
		got := e.roundTrip(t, Request{}, tc.method, tc.params, response(t, `{"capabilities":{"experimental":{"up":true}}}`))
		if s := jsonrpc.Path(got.Result, "capabilities", "streams"); string(s) != tc.want {
			t.Errorf("%s: streams %s, want %q", tc.name, s, tc.want)
		}
		// What the upstream declared itself stays as it said.
		if x := jsonrpc.Path(got.Result, "capabilities", "experimental"); string(x) != `{"up":true}` {
			t.Errorf("%s: experimental %s", tc.name, x)
		}
	}
}
