package mcpproxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/spillway-dev/spillway/artifact/identity"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy"
)

// sseToolServer is a stateless-era (2026-07-28) HTTP upstream that
// answers every tools/call on an event stream: a progress notification,
// then a result big enough to be offloaded, whose text names the caller
// and call it answers (from the arguments).
func sseToolServer(t *testing.T) string {
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Arguments struct {
					Who string `json:"who"`
					N   int    `json:"n"`
				} `json:"arguments"`
				Meta struct {
					Token json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &req) != nil || req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if req.Method != "tools/call" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete"}}`, req.ID)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		if req.Params.Meta.Token != nil {
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%s,\"progress\":1}}\n\n", req.Params.Meta.Token)
			w.(http.Flusher).Flush()
		}
		text := strings.Repeat(fmt.Sprintf("caller=%s call=%d ", req.Params.Arguments.Who, req.Params.Arguments.N), 1200)
		res, _ := json.Marshal(map[string]any{"resultType": "complete", "content": []any{map[string]any{"type": "text", "text": text}}})
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n\n", req.ID, res)
	}))
}

// statelessCall posts one 2026-07-28 request as the holder of token and
// returns every JSON-RPC message of the answer, JSON or event stream.
func statelessCall(t *testing.T, url, token string, id int, method string, params map[string]any) ([]map[string]json.RawMessage, error) {
	meta := map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": map[string]any{}}
	if m, ok := params["_meta"].(map[string]any); ok {
		for k, v := range m {
			meta[k] = v
		}
	}
	params["_meta"] = meta
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if n, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	}
	if u, ok := params["uri"].(string); ok {
		req.Header.Set("Mcp-Name", u)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var raws [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				raws = append(raws, []byte(d))
			}
		}
	} else {
		b, _ := io.ReadAll(resp.Body)
		raws = append(raws, b)
	}
	var out []map[string]json.RawMessage
	for _, r := range raws {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(r, &m); err != nil {
			return nil, fmt.Errorf("not JSON-RPC: %q", r)
		}
		out = append(out, m)
	}
	return out, nil
}

// TestTenantsWithSameIDs: two tenants send 500 calls each, concurrently,
// with identical request ids and progress tokens, through an upstream that
// answers on event streams. Every offloaded artifact belongs to the tenant
// whose call produced it; neither can read or list the other's.
func TestTenantsWithSameIDs(t *testing.T) {
	const calls = 500
	svc := newService(t)
	eng, err := policy.New(t.Context(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tenants, err := identity.ParseTenants("tok-aaaaaaaaaaaaaaaa=A,tok-bbbbbbbbbbbbbbbb=B")
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: sseToolServer(t), Transport: "streamable"},
		Artifacts: svc, Tenants: tenants,
		Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{TextThreshold: 1000})})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	url := serve(t, p)
	token := map[string]string{"A": "tok-aaaaaaaaaaaaaaaa", "B": "tok-bbbbbbbbbbbbbbbb"}
	other := map[string]string{"A": "B", "B": "A"}

	type link struct {
		who string
		n   int
		uri string
	}
	var mu sync.Mutex
	var links []link
	inline := 0
	var wg sync.WaitGroup
	for _, who := range []string{"A", "B"} {
		work := make(chan int)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range work {
					msgs, err := statelessCall(t, url, token[who], n, "tools/call", map[string]any{
						"name": "report", "arguments": map[string]any{"who": who, "n": n}, "_meta": map[string]any{"progressToken": "tok"}})
					if err != nil {
						t.Error(err)
						continue
					}
					var res struct {
						Content []struct {
							Type string `json:"type"`
							URI  string `json:"uri"`
						} `json:"content"`
					}
					found := ""
					for _, m := range msgs {
						if string(m["id"]) == fmt.Sprint(n) && m["result"] != nil {
							json.Unmarshal(m["result"], &res)
							for _, c := range res.Content {
								if c.Type == "resource_link" {
									found = c.URI
								}
							}
						}
					}
					if found == "" {
						mu.Lock()
						inline++
						if inline < 4 {
							t.Errorf("%s call %d: no resource_link in %.300s", who, n, show(msgs))
						}
						mu.Unlock()
						continue
					}
					mu.Lock()
					links = append(links, link{who, n, found})
					mu.Unlock()
				}
			}()
		}
		go func() {
			for n := 1; n <= calls; n++ {
				work <- n
			}
			close(work)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.Fatalf("%d of %d results came back without their link", inline, 2*calls)
	}
	// Each link reads back, as its owner, exactly that call's output, and
	// is not found for the other tenant.
	wrong := 0
	for i, l := range links {
		msgs, err := statelessCall(t, url, token[l.who], 100000+i, "resources/read", map[string]any{"uri": l.uri})
		if err != nil || len(msgs) != 1 || msgs[0]["result"] == nil {
			wrong++
			if wrong < 5 {
				t.Errorf("%s cannot read its own %s (call %d): %v %.300s", l.who, l.uri, l.n, err, show(msgs))
			}
			continue
		}
		if want := fmt.Sprintf("caller=%s call=%d ", l.who, l.n); !strings.Contains(string(msgs[0]["result"]), want) {
			wrong++
			if wrong < 5 {
				t.Errorf("%s's artifact for call %d holds another call's output: %.120s", l.who, l.n, msgs[0]["result"])
			}
		}
		if i%10 == 0 { // the other tenant: not found, for a sample
			msgs, _ := statelessCall(t, url, token[other[l.who]], 200000+i, "resources/read", map[string]any{"uri": l.uri})
			if len(msgs) != 1 || msgs[0]["error"] == nil {
				t.Errorf("%s read %s's artifact %s: %.300s", other[l.who], l.who, l.uri, show(msgs))
			}
		}
	}
	if wrong > 0 {
		t.Fatalf("%d of %d artifacts were wrong", wrong, len(links))
	}
	for _, who := range []string{"A", "B"} {
		msgs, err := statelessCall(t, url, token[who], 1, "resources/list", map[string]any{})
		if err != nil || len(msgs) != 1 {
			t.Fatalf("resources/list as %s: %v %.300s", who, err, show(msgs))
		}
		for _, l := range links {
			if l.who != who && strings.Contains(string(msgs[0]["result"]), l.uri) {
				t.Fatalf("%s's resources/list shows %s's artifact %s", who, l.who, l.uri)
			}
		}
	}
}

func show(msgs []map[string]json.RawMessage) string {
	b, _ := json.Marshal(msgs)
	return string(b)
}
