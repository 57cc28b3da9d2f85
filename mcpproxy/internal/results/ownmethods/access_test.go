package ownmethods

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// accessPolicy lets links (the /a/ endpoint) through, and MCP reads of
// everything but secret.txt; only redirect-ok.bin may leave as a storage
// URL.
const accessPolicy = `package spillway

default offload := {"offload": false}

default mint := {"allow": true}

default fetch := {"allow": false, "reason": "not for MCP clients"}

fetch := {"allow": true} if input.via == "link"

fetch := {"allow": true, "redirect": input.artifact.name == "redirect-ok.bin"} if {
	input.via != "link"
	input.artifact.name != "secret.txt"
	input.request.method == "GET"
}
`

// resources/read, resources/list and resources/stream in every mode ask
// the policy's fetch decision, as the /a/ endpoint does. resources/read
// never asked it; redirect mode presigned a storage URL before any fetch
// decision, so an artifact the policy kept from MCP clients, or from
// storage URLs, left as a 302.
func TestAccessRuleFetchDecision(t *testing.T) {
	e := newEnvPolicy(t, miniotest.Start(t).Store(t), Options{StreamMode: StreamRedirect}, accessPolicy)
	data := bytes.Repeat([]byte("spillway"), 1000)
	secret := e.publishNamed(t, "secret.txt", "a", "text/plain", data)
	plain := e.publishNamed(t, "plain.bin", "a", "application/octet-stream", data)
	redirect := e.publishNamed(t, "redirect-ok.bin", "a", "application/octet-stream", data)
	for _, a := range []artifact.Artifact{secret, plain, redirect} {
		e.m.Remember("a", a)
	}
	rq := Request{Tenant: "a"}

	got := e.roundTrip(t, rq, "resources/read", map[string]any{"uri": artifact.URI(secret.ID)}, nil)
	if errCode(got) != jsonrpc.CodeInvalidRequest || !bytes.Contains(got.Raw, []byte("not for MCP clients")) {
		t.Errorf("read of a denied artifact: %s", got.Raw)
	}
	if got := e.roundTrip(t, rq, "resources/read", map[string]any{"uri": artifact.URI(plain.ID)}, nil); got.Error != nil {
		t.Errorf("read of an allowed artifact: %s", got.Raw)
	}
	list := e.roundTrip(t, rq, "resources/list", map[string]any{}, response(t, `{"resources":[]}`))
	if bytes.Contains(list.Result, []byte(secret.ID)) || !bytes.Contains(list.Result, []byte(plain.ID)) {
		t.Errorf("list: %s", list.Result)
	}

	caps := StreamCaps{Client: true}
	for _, mode := range []string{StreamRedirect, StreamDirect, StreamDownload} {
		o := e.m.o
		o.StreamMode = mode
		m := New(o)
		w := serveStream(t, m, rq, artifact.URI(secret.ID), caps)
		if w.Code != http.StatusOK || w.Header().Get("Location") != "" || !bytes.Contains(w.Body.Bytes(), []byte("not for MCP clients")) {
			t.Errorf("%s: stream of a denied artifact: %d %v %.200s", mode, w.Code, w.Header(), w.Body)
		}
	}
	// Allowed, but not as a storage URL: streamed directly, no 302.
	w := serveStream(t, e.m, rq, artifact.URI(plain.ID), caps)
	if w.Code != http.StatusOK || w.Header().Get("Location") != "" || !bytes.Equal(w.Body.Bytes(), data) {
		t.Errorf("redirect not allowed: %d %v, %d bytes", w.Code, w.Header(), w.Body.Len())
	}
	// Allowed as a storage URL.
	w = serveStream(t, e.m, rq, artifact.URI(redirect.ID), caps)
	if w.Code != http.StatusFound {
		t.Fatalf("redirect allowed: %d %.200s", w.Code, w.Body)
	}
	if got, _ := io.ReadAll(get(t, w.Header().Get("Location"))); !bytes.Equal(got, data) {
		t.Errorf("the storage URL served %d bytes", len(got))
	}
}
