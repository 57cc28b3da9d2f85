package mcpproxy_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
)

const statelessMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// A tool whose name a header cannot carry as it is ("météo"): a client
// sends Mcp-Name base64-encoded, as SEP-2243 requires, and the HTTP face
// in front of a stdio upstream decodes it before comparing (it compared
// the encoded value with the name and refused the call with -32020).
func TestMcpNameDecoded(t *testing.T) {
	// A stdio server that lists the tool (with an x-mcp-header binding)
	// and answers its calls. It answers neither server/discover nor
	// initialize: StrictEras forwards the request as it is, where
	// learning the child's era would wait the probe's minute for an
	// answer that never comes.
	script := `while read l; do id=$(echo "$l" | sed 's/.*"id":\([0-9]*\).*/\1/')
		case "$l" in
		*'"tools/list"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"m\303\251t\303\251o","inputSchema":{"type":"object","properties":{"city":{"type":"string","x-mcp-header":"City"}}}}]}}\n' "$id";;
		*'"tools/call"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"sunny"}]}}\n' "$id";;
		esac; done`
	p, err := mcpproxy.New(mcpproxy.Options{StrictEras: true, Upstream: &mcpproxy.CommandUpstream{Command: "sh", Args: []string{"-c", script}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"météo","arguments":{"city":"Zürich"},` + statelessMeta + `}}`
	hdr := map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
		"Mcp-Name": "=?base64?bcOpdMOpbw==?=", "Mcp-Param-City": "=?base64?WsO8cmljaA==?="}
	rec := post(t, p, body, hdr)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "sunny") {
		t.Fatalf("encoded Mcp-Name: %d %s", rec.Code, rec.Body)
	}
	for _, bad := range []map[string]string{{"Mcp-Name": "=?base64?bWV0ZW8=?="}, {"Mcp-Param-City": "Zurich"}} {
		h := map[string]string{}
		for k, v := range hdr {
			h[k] = v
		}
		for k, v := range bad {
			h[k] = v
		}
		rec := post(t, p, body, h)
		if rec.Code != http.StatusBadRequest || errorCode(t, rec.Body.Bytes()) != -32020 {
			t.Errorf("%v: %d %s; want 400, -32020", bad, rec.Code, rec.Body)
		}
	}
}

// Spillway as a client (the stdio face in front of an HTTP upstream)
// sends such a name encoded; it sent the raw UTF-8 bytes.
func TestMcpNameEncoded(t *testing.T) {
	var mu sync.Mutex
	var got []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID json.RawMessage `json:"id"`
		}
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &m)
		mu.Lock()
		got = append(got, r.Header.Get("Mcp-Method")+" "+r.Header.Get("Mcp-Name"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"content":[]}}`)
	}))
	defer up.Close()
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: up.URL, Transport: "streamable"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	in, inW := io.Pipe()
	outR, out := io.Pipe()
	go p.ServeStdio(t.Context(), in, out)
	go io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":" météo",`+statelessMeta+`}}`+"\n")
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(outR).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if !strings.Contains(l, `"result"`) {
			t.Fatalf("answer: %s", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "tools/call =?base64?IG3DqXTDqW8=?=" {
		t.Fatalf("the upstream got %q", got)
	}
}
