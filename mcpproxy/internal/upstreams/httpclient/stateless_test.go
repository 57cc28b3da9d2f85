package httpclient

import (
	"context"
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// Stateless era: the request's _meta version goes in Mcp-Protocol-Version,
// Mcp-Method and Mcp-Name (base64 when not plain visible ASCII) are set,
// and the caller's hook adds its own headers (Mcp-Param-*).
func TestStatelessHeaders(t *testing.T) {
	var j journal
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		m := request(r)
		h := r.Header
		j.add("v=%s method=%s name=%s param=%s session=%s", h.Get("Mcp-Protocol-Version"), h.Get("Mcp-Method"),
			h.Get("Mcp-Name"), h.Get("Mcp-Param-Region"), h.Get("Mcp-Session-Id"))
		if m.IsRequest() {
			answer(w, m, `{}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	c := dial(t, Options{URL: url, Header: func(m *jsonrpc.Message, h http.Header) {
		if m != nil && m.Method == "tools/call" && h.Get("Mcp-Method") != "" {
			h.Set("Mcp-Param-Region", "eu")
		}
	}})
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	call(t, c, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"plain_tool",`+meta+`}}`)
	call(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"wéird tool",`+meta+`}}`)
	call(t, c, `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":" file:///a ",`+meta+`}}`)
	call(t, c, `{"jsonrpc":"2.0","id":4,"method":"prompts/get","params":{"name":"=?base64?eA==?=",`+meta+`}}`)
	call(t, c, `{"jsonrpc":"2.0","id":5,"method":"server/discover","params":{`+meta+`}}`)
	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	want := []string{
		"v=2026-07-28 method=tools/call name=plain_tool param=eu session=",
		"v=2026-07-28 method=tools/call name=" + b64("wéird tool") + " param=eu session=",
		"v=2026-07-28 method=resources/read name=" + b64(" file:///a ") + " param= session=",
		"v=2026-07-28 method=prompts/get name=" + b64("=?base64?eA==?=") + " param= session=",
		"v=2026-07-28 method=server/discover name= param= session=",
	}
	if got := j.list(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("headers:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Cancellation, stateless era: the request's HTTP exchange is aborted
// (the server sees its client go) and no notification is POSTed.
func TestCancelStatelessAbortsTheExchange(t *testing.T) {
	gone := make(chan struct{})
	running := make(chan struct{})
	var j journal
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		m := request(r)
		j.add("%s", m.Method)
		if m.Method == "tools/call" {
			events(w, ": working\n\n")
			close(running)
			<-r.Context().Done()
			close(gone)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	c := dial(t, Options{URL: url})
	send(t, c, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	// Send returns once the request is written, not once the server
	// runs it (a cancellation before that may keep it from arriving).
	<-running
	send(t, c, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`)
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the exchange of the cancelled request is still open")
	}
	if got := strings.Join(j.list(), ","); got != "tools/call" {
		t.Errorf("requests %s: a stateless cancel is the closed stream, not a POST", got)
	}
}

// Cancellation, session era: the notification is POSTed; when it names a
// subscriptions/listen request, that stream is aborted too.
func TestCancelSessionPostsAndEndsListen(t *testing.T) {
	gone := make(chan string, 2)
	running := make(chan string, 2)
	var j journal
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		m := request(r)
		j.add("%s", m.Method)
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			answer(w, m, `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}`)
		case "subscriptions/listen", "tools/call":
			events(w, ": open\n\n")
			running <- m.Method
			<-r.Context().Done()
			gone <- m.Method
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	c := dial(t, Options{URL: url})
	handshake(t, c)
	send(t, c, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`)
	send(t, c, `{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen","params":{}}`)
	<-running // both run upstream (Send does not wait for that)
	<-running
	send(t, c, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	send(t, c, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}`)
	select {
	case m := <-gone:
		if m != "subscriptions/listen" {
			t.Errorf("%s ended: the session era cancels a tool call by notification only", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled subscriptions/listen stream is still open")
	}
	waitFor(t, 5*time.Second, "both cancellations POSTed", func() bool { return len(j.list()) == 6 })
	// After the handshake, POSTs run side by side: the server may read
	// them in any order.
	got := j.list()
	slices.Sort(got[2:])
	if got := strings.Join(got, ","); got != "initialize,notifications/initialized,notifications/cancelled,notifications/cancelled,subscriptions/listen,tools/call" {
		t.Errorf("requests %s", got)
	}
}

// A server whose first event is 2 GB: the caller gets an error for its
// request, memory stays bounded by the message cap, and the connection
// goes on.
func TestHugeEventIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 2 GB over loopback")
	}
	const size = 2 << 30
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		m := request(r)
		if m.Method != "huge" {
			answer(w, m, `{"small":true}`)
			return
		}
		events(w, `data: {"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"text":"`)
		chunk := []byte(strings.Repeat("x", 1<<20))
		for n := 0; n < size; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		events(w, "\"}}\n\n")
	})
	c := dial(t, Options{URL: url, Transport: Streamable, MaxMessage: 1 << 20})
	var before, after runtimeMem
	before.read()
	send(t, c, `{"jsonrpc":"2.0","id":9,"method":"huge"}`)
	start := time.Now()
	r, _ := awaitFor(t, c, "9", 10*time.Minute)
	t.Logf("2 GB discarded in %v", time.Since(start))
	after.read()
	if r.Error == nil || !strings.Contains(string(r.Error), "exceeds the 1048576 byte limit") {
		t.Errorf("answer %.200s, want the size error", r.Raw)
	}
	n := after.total - before.total
	t.Logf("%d MB allocated in the process (server included) while a 2 GB event was discarded", n>>20)
	if n > 64<<20 {
		t.Errorf("%d MB allocated while discarding a 2 GB event", n>>20)
	}
	if r := call(t, c, `{"jsonrpc":"2.0","id":10,"method":"small"}`); r.Error != nil {
		t.Errorf("after it: %s", r.Raw)
	}
}

// A legacy-only server (2024-11-05): POST first, refused with 405; then
// the GET event stream, its endpoint, and every answer on the stream. A
// lost stream is reconnected and the handshake replayed.
func TestLegacyOnlyServer(t *testing.T) {
	var j journal
	streams := make(chan chan string, 4)
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/mcp":
			j.add("POST /mcp")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		case r.Method == http.MethodGet:
			j.add("GET")
			out := make(chan string, 8)
			streams <- out
			events(w, ": hello\n\nevent: endpoint\ndata: /messages?s=1\n\n")
			for {
				select {
				case e, ok := <-out:
					if !ok {
						return // the stream is cut
					}
					events(w, "event: message\ndata: "+e+"\n\n")
				case <-r.Context().Done():
					return
				}
			}
		case r.URL.Path == "/messages":
			m := request(r)
			j.add("POST %s %s", m.Method, string(m.ID))
			w.WriteHeader(http.StatusAccepted)
			if m.IsRequest() {
				go func() {
					out := <-streams
					streams <- out
					out <- `{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"protocolVersion":"2024-11-05"}}`
				}()
			}
		}
	})
	c := dial(t, Options{URL: url})
	handshake(t, c)
	if r := call(t, c, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); r.Error != nil {
		t.Fatalf("tools/list: %s", r.Raw)
	}
	want := "POST /mcp|GET|POST initialize 0|POST notifications/initialized |POST tools/list 1"
	if got := strings.Join(j.list(), "|"); got != want {
		t.Errorf("requests\n%s\nwant\n%s", got, want)
	}
	close(<-streams) // the stream breaks
	waitFor(t, 10*time.Second, "reconnection with the handshake replayed", func() bool {
		return strings.HasSuffix(strings.Join(j.list(), "|"), `|GET|POST initialize "spillway-reinitialize"|POST notifications/initialized `)
	})
	if r := call(t, c, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); r.Error != nil {
		t.Fatalf("after reconnecting: %s", r.Raw)
	}
}

// A server that refuses initialize with 404 and offers no legacy stream
// either (a stateless-only server): its refusal is the answer.
func TestRefusedInitializeIsTheAnswer(t *testing.T) {
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		m := request(r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write(jsonrpc.ErrorResponse(m.ID, jsonrpc.CodeMethodNotFound, "no initialize here").Raw)
	})
	c := dial(t, Options{URL: url})
	r := call(t, c, initialize)
	if r.ErrorCode() != jsonrpc.CodeMethodNotFound {
		t.Errorf("answer %s", r.Raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Send(ctx, msg(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)); err != nil {
		t.Fatal(err)
	}
	if r, _ := await(t, c, "1"); r.ErrorCode() != jsonrpc.CodeMethodNotFound {
		t.Errorf("the connection stays streamable: %s", r.Raw)
	}
}
