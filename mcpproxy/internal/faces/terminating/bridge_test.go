package terminating

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/mcpproxy/internal/routing/pool"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/mcpheader"
)

func TestToStateless(t *testing.T) {
	for _, tc := range []struct {
		name, method, in, want string
	}{
		{"a call", "tools/call", `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`,
			`{"jsonrpc":"2.0","id":"x","result":{"content":[],"resultType":"complete"}}`},
		{"a list", "tools/list", `{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}`,
			`{"jsonrpc":"2.0","id":"x","result":{"tools":[],"resultType":"complete","ttlMs":0,"cacheScope":"private"}}`},
		{"the upstream's own members stay", "resources/read", `{"jsonrpc":"2.0","id":7,"result":{"contents":[],"resultType":"complete","ttlMs":5,"cacheScope":"public"}}`,
			`{"jsonrpc":"2.0","id":"x","result":{"contents":[],"resultType":"complete","ttlMs":5,"cacheScope":"public"}}`},
		{"resource not found", "resources/read", `{"jsonrpc":"2.0","id":7,"error":{"code":-32002,"message":"Resource not found","data":{"uri":"u"}}}`,
			`{"jsonrpc":"2.0","id":"x","error":{"code":-32602,"message":"Resource not found","data":{"uri":"u"}}}`},
		{"another error", "tools/call", `{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"no"}}`,
			`{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"no"}}`},
		{"a result that is no object", "ping", `{"jsonrpc":"2.0","id":7,"result":null}`,
			`{"jsonrpc":"2.0","id":"x","result":null}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := toStateless(jsonrpc.MustDecode(tc.in), []byte(`"x"`), tc.method)
			if string(got.Raw) != tc.want {
				t.Errorf("got  %s\nwant %s", got.Raw, tc.want)
			}
		})
	}
}

func TestBridgeCaps(t *testing.T) {
	req := func(caps string) *jsonrpc.Message {
		return jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`)
	}
	for _, tc := range []struct {
		caps, want string
		asks       bool
		wantErr    string
	}{
		{caps: `{}`, want: `{}`},
		{caps: `{"tasks":{"requests":{}},"extensions":{"x":1}}`, want: `{}`},
		{caps: `{"sampling":{"tools":{}},"elicitation":{"form":{}}}`, want: `{"elicitation":{"form":{}},"sampling":{"tools":{}}}`, asks: true},
		{caps: `{"elicitation":{"form":{}},"sampling":{"tools":{}}}`, want: `{"elicitation":{"form":{}},"sampling":{"tools":{}}}`, asks: true},
		{caps: `{"roots":{"listChanged":true},"experimental":{"b":2,"a":1}}`, want: `{"experimental":{"a":1,"b":2},"roots":{"listChanged":true}}`, asks: true},
		{caps: `[]`, wantErr: "not an object"},
		{caps: `{"experimental":{"x":"` + strings.Repeat("a", maxCapsKey) + `"}}`, wantErr: "too large"},
	} {
		caps, asks, err := bridgeCaps(req(tc.caps))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want %q", tc.caps, err, tc.wantErr)
			}
			continue
		}
		if err != nil || string(caps) != tc.want || asks != tc.asks {
			t.Errorf("%s: got %s %v %v, want %s %v", tc.caps, caps, asks, err, tc.want, tc.asks)
		}
		// The key keeps the tenant apart and gives the capabilities back.
		for _, tenant := range []string{"", "a b", `q"{`} {
			key := pool.CapsKey(tenant, caps)
			if got := pool.KeyCaps(key + "#3"); string(got) != string(caps) {
				t.Errorf("pool.KeyCaps(%q) = %s", key, got)
			}
			if !strings.HasPrefix(key, pool.TenantKey(tenant)+" ") || pool.KeyCaps(pool.TenantKey(tenant)) != nil {
				t.Errorf("tenant %q: key %q", tenant, key)
			}
		}
	}
}

func TestStripEnvelope(t *testing.T) {
	m := jsonrpc.MustDecode(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},` +
		`"io.modelcontextprotocol/clientInfo":{"name":"c"},"io.modelcontextprotocol/logLevel":"debug","progressToken":"p"}}}`)
	got := mcpheader.StripEnvelope(m)
	if meta := string(jsonrpc.Path(got.Params, "_meta")); meta != `{"progressToken":"p"}` {
		t.Errorf("_meta upstream: %s", meta)
	}
}

func TestDiscoverResult(t *testing.T) {
	r := discoverResult([]byte(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"s","version":"2"},"instructions":"be kind"}`))
	var d map[string]json.RawMessage
	json.Unmarshal(r, &d)
	for k, want := range map[string]string{"supportedVersions": `["2026-07-28"]`, "capabilities": `{"tools":{"listChanged":true}}`,
		"instructions": `"be kind"`, "resultType": `"complete"`, "cacheScope": `"private"`, "ttlMs": `0`,
		"_meta": `{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"2"}}`} {
		if string(d[k]) != want {
			t.Errorf("%s: %s, want %s", k, d[k], want)
		}
	}
}

// A parked call is the tenant's alone, taken once, and a tenant parks at
// most maxParked.
func TestParkTable(t *testing.T) {
	pt := newParkTable()
	expired := func(*parked) {}
	a := &parked{tenant: "a"}
	tok := newToken()
	if err := pt.put(tok, a, expired); err != nil {
		t.Fatal(err)
	}
	if pt.take(tok, "b") != nil {
		t.Error("another tenant took the call")
	}
	if pt.take(tok, "a") != a {
		t.Error("the tenant did not get its call")
	}
	if pt.take(tok, "a") != nil {
		t.Error("a call was taken twice")
	}
	for range maxParked {
		if err := pt.put(newToken(), &parked{tenant: "a"}, expired); err != nil {
			t.Fatal(err)
		}
	}
	if err := pt.put(newToken(), &parked{tenant: "a"}, expired); !errors.Is(err, errTooManyParked) {
		t.Errorf("past the bound: %v", err)
	}
	if err := pt.put(newToken(), &parked{tenant: "b"}, expired); err != nil {
		t.Errorf("another tenant is refused: %v", err)
	}
	if n := len(pt.drain()); n != maxParked+1 {
		t.Errorf("drained %d", n)
	}
}

func FuzzBridgeCaps(f *testing.F) {
	for _, s := range []string{`{}`, `{"sampling":{}}`, `[]`, `null`, `{"experimental":{"a":[1,2,{"b":null}]}}`, `"x"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, caps string) {
		m, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`))
		if err != nil {
			return
		}
		c, _, err := bridgeCaps(m)
		if err != nil {
			return
		}
		if !json.Valid(c) || string(pool.KeyCaps(pool.CapsKey("t", c)+"#0")) != string(c) {
			t.Fatalf("caps %s: key gives back %s", c, pool.KeyCaps(pool.CapsKey("t", c)))
		}
		mcpheader.StripEnvelope(m)
	})
}

func FuzzToStateless(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":1,"result":[]}`,
		`{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"m"}}`, `{"jsonrpc":"2.0","id":1,"error":{"code":"x"}}`} {
		f.Add(s, "tools/list")
	}
	f.Fuzz(func(t *testing.T, msg, method string) {
		m, err := jsonrpc.DecodeMessage([]byte(msg))
		if err != nil || !m.IsResponse() {
			return
		}
		out := toStateless(m, []byte(`9`), method)
		if !json.Valid(out.Raw) || string(out.ID) != "9" {
			t.Fatalf("%s became %s", msg, out.Raw)
		}
	})
}
