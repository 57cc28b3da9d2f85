package binary

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/binframe"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

func TestParseClient(t *testing.T) {
	for _, tc := range []struct {
		caps string
		ok   bool
		want ClientCaps
	}{
		{`{}`, false, ClientCaps{}},
		{`{"binaryTransfer":{}}`, false, ClientCaps{}},
		{`{"binaryTransfer":{"supported":false}}`, false, ClientCaps{}},
		{`{"binaryTransfer":{"supported":"true"}}`, false, ClientCaps{}},
		{`{"binaryTransfer":true}`, false, ClientCaps{}},
		{`{"binaryTransfer":{"supported":true}}`, true, ClientCaps{}},
		{`{"binaryTransfer":{"supported":true,"preferredMode":"stream","maxBinarySize":1000}}`, true, ClientCaps{Mode: "stream", Max: 1000}},
		{`{"binaryTransfer":{"supported":true,"preferredMode":7,"maxBinarySize":-5}}`, true, ClientCaps{}},
		{`{"binaryTransfer":{"supported":true,"maxBinarySize":1e9}}`, true, ClientCaps{}},
	} {
		got, ok := ParseClient([]byte(tc.caps))
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v %v", tc.caps, got, ok, tc.want, tc.ok)
		}
	}
	if c := (ClientCaps{Max: 10}); c.limit(100) != 10 || (ClientCaps{}).limit(100) != 100 || (ClientCaps{Max: 1000}).limit(100) != 100 {
		t.Error("limit")
	}
}

// Declare answers a client that declared binaryTransfer alone, with the
// modes Spillway serves (never websocket-binary).
func TestDeclare(t *testing.T) {
	if _, v := Declare([]byte(`{"streams":{}}`), 0); v != nil {
		t.Errorf("declared to a client that did not: %s", v)
	}
	name, v := Declare([]byte(`{"binaryTransfer":{"supported":true}}`), 0)
	if name != Capability || string(v) != `{"maxBinarySize":1073741824,"supported":true,"supportedModes":["stream","multipart"]}` {
		t.Errorf("%s: %s", name, v)
	}
}

// A stream id resolves for the tenant it was minted for, until its
// artifact expires; another tenant's lookup is an unknown id's.
func TestRefs(t *testing.T) {
	r := newRefs()
	id := binframe.NewStreamID()
	r.add("a", id, "spillway://artifacts/x", time.Time{})
	if uri, ok := r.lookup("a", id); !ok || uri != "spillway://artifacts/x" {
		t.Errorf("own tenant: %q %v", uri, ok)
	}
	if _, ok := r.lookup("b", id); ok {
		t.Error("another tenant resolved the id")
	}
	old := binframe.NewStreamID()
	r.add("a", old, "spillway://artifacts/y", time.Now().Add(-time.Second))
	if _, ok := r.lookup("a", old); ok {
		t.Error("an expired id resolved")
	}
}

// FuzzParseClient: any capabilities object parses without panic, and a
// client is binary only when it declared supported: true, with a limit
// that is never negative.
func FuzzParseClient(f *testing.F) {
	f.Add([]byte(`{"binaryTransfer":{"supported":true,"preferredMode":"multipart","maxBinarySize":10}}`))
	f.Add([]byte(`{"binaryTransfer":{"supported":true,"supported":false}}`))
	f.Add([]byte(`{"binaryTransfer":[1,2]}`))
	f.Fuzz(func(t *testing.T, caps []byte) {
		if !jsonrpc.Valid(caps) {
			return // capabilities come from a decoded message
		}
		c, ok := ParseClient(caps)
		if c.Max < 0 {
			t.Errorf("negative limit %d", c.Max)
		}
		if ok {
			var v struct {
				B struct {
					Supported bool `json:"supported"`
				} `json:"binaryTransfer"`
			}
			if json.Unmarshal(caps, &v) == nil && !v.B.Supported {
				t.Errorf("binary without supported: true: %s", caps)
			}
		}
		_, d := Declare(caps, 0)
		if (d != nil) != ok {
			t.Errorf("declared %s to %s", d, caps)
		}
	})
}

// FuzzAcceptsMultipart: any Accept header is read without panic, and one
// naming no multipart type never turns binary transfer on.
func FuzzAcceptsMultipart(f *testing.F) {
	f.Add("application/json, text/event-stream, multipart/mixed")
	f.Add("multipart/mixed;q=0")
	f.Add("*/*")
	f.Fuzz(func(t *testing.T, accept string) {
		h := map[string][]string{"Accept": {accept}}
		if acceptsMultipart(h) && !strings.Contains(strings.ToLower(accept), "multipart/") {
			t.Errorf("%q accepted", accept)
		}
	})
}

// FuzzConvert: whatever result an upstream sends, converting it never
// panics, gives valid JSON, and announces exactly the items it returns.
func FuzzConvert(f *testing.F) {
	f.Add([]byte(`{"content":[{"type":"image","mimeType":"image/png","data":"iVBORw0KGgo="},{"type":"text","text":"x"}]}`))
	f.Add([]byte(`{"content":[{"type":"resource","resource":{"uri":"a","blob":"AAEC"}}],"contents":[{"uri":"b","blob":"AA=="}]}`))
	f.Add([]byte(`{"content":[{"type":"audio","data":"!!"},{"type":"resource_link","uri":"spillway://artifacts/x","_meta":{"dev.spillway/link":{"originalType":"image"}}}]}`))
	f.Fuzz(func(t *testing.T, result []byte) {
		if !jsonrpc.Valid(result) {
			return
		}
		m := jsonrpc.Response([]byte("1"), result)
		c := &converter{max: 1 << 20, refs: newRefs()}
		out, items := c.message(context.Background(), m)
		defer release(items)
		if !jsonrpc.Valid(out.Raw) {
			t.Fatalf("invalid JSON: %s", out.Raw)
		}
		if n := strings.Count(string(out.Raw), `"binaryRef":`) - strings.Count(string(m.Raw), `"binaryRef":`); n != len(items) {
			t.Errorf("%d refs added for %d items: %s", n, len(items), out.Raw)
		}
		for _, it := range items {
			b, _ := io.ReadAll(it.open())
			if int64(len(b)) != it.size {
				t.Errorf("item of %d bytes announced as %d", len(b), it.size)
			}
		}
	})
}
