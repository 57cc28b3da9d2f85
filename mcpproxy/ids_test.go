package mcpproxy_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/mcpproxy"
)

// respeller is a real HTTP upstream that decodes each request's JSON and
// encodes its answer again, as a JavaScript server does: the id 1.0 comes
// back as 1, "\u0061" as "a". It answers over SSE (then ends the stream)
// or with a JSON body, with a result or, for resources/templates/list,
// "method not found"; it records the params each request arrived with.
func respeller(t *testing.T, sse bool) (url string, params chan string) {
	params = make(chan string, 16)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &req) != nil || req["method"] == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		p, _ := json.Marshal(req["params"])
		params <- string(p)
		resp := map[string]any{"jsonrpc": "2.0", "id": req["id"], "result": map[string]any{}}
		if req["method"] == "resources/templates/list" {
			delete(resp, "result")
			resp["error"] = map[string]any{"code": -32601, "message": "no templates here"}
		}
		out, _ := json.Marshal(resp)
		if sse {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: "+string(out)+"\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
	}))
	t.Cleanup(up.Close)
	return up.URL, params
}

// A client's id is answered with its own bytes, and matched to its
// request however the upstream spells it: 1.0 answered as 1 is one
// answer (not that answer plus a "stream ended without answering" error
// for 1.0), and a call the proxy owns is still rewritten when the
// upstream respells its id.
func TestRespeltIDs(t *testing.T) {
	t.Run("sse", func(t *testing.T) {
		url, _ := respeller(t, true)
		p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: url, Transport: "streamable"}})
		if err != nil {
			t.Fatal(err)
		}
		rec := post(t, p, `{"jsonrpc":"2.0","id":1.0,"method":"ping"}`, nil)
		var answers []string
		for _, line := range strings.Split(rec.Body.String(), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok && data != "" {
				answers = append(answers, data)
			}
		}
		if len(answers) != 1 || !strings.HasPrefix(answers[0], `{"id":1.0,`) || !strings.Contains(answers[0], `"result":{}`) {
			t.Errorf("answers to id 1.0: %q", answers)
		}
	})
	t.Run("owned", func(t *testing.T) {
		url, _ := respeller(t, false)
		p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: url, Transport: "streamable"}, Artifacts: newService(t)})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{`2.0`, `"\u0061"`} {
			rec := post(t, p, `{"jsonrpc":"2.0","id":`+id+`,"method":"resources/templates/list","params":{}}`, nil)
			body := rec.Body.String()
			if rec.Code != 200 || !strings.Contains(body, `"id":`+id) || !strings.Contains(body, `"uriTemplate":"spillway://artifacts/{id}"`) {
				t.Errorf("id %s: %d %s", id, rec.Code, body)
			}
		}
	})
}

// "params": null is params absent: the request is relayed, not refused.
func TestNullParamsRelayed(t *testing.T) {
	url, params := respeller(t, false)
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: url, Transport: "streamable"}})
	if err != nil {
		t.Fatal(err)
	}
	rec := post(t, p, `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":null}`, nil)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"result":{}`) {
		t.Fatalf("tools/list with null params: %d %s", rec.Code, rec.Body)
	}
	if got := <-params; got != "null" {
		t.Errorf("the upstream got params %s", got)
	}
}
