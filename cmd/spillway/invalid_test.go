package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The real binary's HTTP faces answer each POST that may not pass on with
// HTTP 400 and the JSON-RPC error that lets a client go on (id null):
// -32700 for a body that is not JSON, -32600 for a request whose id is
// null, an id that is an object, an array or a boolean, and a batch in a
// revision that has none (named by the header, a stateless request's
// _meta, or what the session's initialize settled). None of them reaches the upstream, which records
// all it gets, and the request posted next is answered. In front of the Go
// SDK's everything-server over HTTP (the relay) and as a stdio child (the
// terminating face), of a server that speaks only 2026-07-28 (a session
// is bridged) and of a stdio child that speaks only the session era
// (2026-07-28 requests are bridged); each in both eras: a 2025-11-25
// session and 2026-07-28 requests without one. A 2025-03-26 session's
// batch, a notification and a client's answer still pass.
func TestHTTPAnswersInvalidBodies(t *testing.T) {
	server := tool(t, "SPILLWAY_EVERYTHING_SERVER")
	for _, up := range []struct {
		name  string
		start func(t *testing.T) (args []string, received func() string)
		// bridged: a session's notifications and answers have no
		// stateless-era counterpart to reach the upstream as.
		bridged bool
		valid   string // a request the upstream answers with a result ("": tools/list)
	}{
		{"relay, HTTP upstream", func(t *testing.T) ([]string, func() string) {
			addr := rsFreeAddr(t)
			rsRun(t, nil, server, "-http="+addr, "-stateless=false")
			rsListen(t, addr)
			u, received := recording(t, "http://"+addr)
			return []string{"--upstream-url", u + "/mcp"}, received
		}, false, ""},
		{"terminating face, stdio upstream", func(t *testing.T) ([]string, func() string) {
			return recordingChild(t, server)
		}, false, ""},
		{"HTTP upstream of 2026-07-28 only (a session is bridged)", func(t *testing.T) ([]string, func() string) {
			u, received := recording(t, strings.TrimSuffix(rsEraServer(t), "/mcp"))
			return []string{"--upstream-url", u + "/mcp"}, received
		}, true, ""},
		{"stdio upstream of the session era only (2026-07-28 requests are bridged)", func(t *testing.T) ([]string, func() string) {
			return recordingChild(t, facesChild())
		}, false, "ping"},
	} {
		for _, stateless := range []bool{false, true} {
			name := up.name + ", 2025-11-25 session"
			if stateless {
				name = up.name + ", 2026-07-28"
			}
			valid := cmp.Or(up.valid, "tools/list")
			t.Run(name, func(t *testing.T) {
				args, received := up.start(t)
				base, tok := rsSpillway(t, args...)
				c := &invalidClient{t: t, url: base + "/mcp", tok: tok, version: "2025-11-25"}
				if stateless {
					c.version = "2026-07-28"
				} else {
					c.open()
				}
				for i, tt := range []struct {
					name, body string
					code       int
					noHeader   bool
				}{
					{"a request with id null", `{"jsonrpc":"2.0","id":null,"method":"ping",PARAMS}`, -32600, false},
					{"a notification with id null", `{"jsonrpc":"2.0","id":null,"method":"notifications/roots/list_changed",PARAMS}`, -32600, false},
					{"an id that is an object", `{"jsonrpc":"2.0","id":{"n":1},"method":"ping",PARAMS}`, -32600, false},
					{"an id that is an array", `{"jsonrpc":"2.0","id":[1],"method":"ping",PARAMS}`, -32600, false},
					{"an id that is true", `{"jsonrpc":"2.0","id":true,"method":"ping",PARAMS}`, -32600, false},
					{"a body that is not JSON", `ping, please PROBE`, -32700, false},
					{"cut JSON", `{"jsonrpc":"2.0","id":7,"method":"ping",PARAMS`, -32700, false},
					{"a batch", `[{"jsonrpc":"2.0","id":8,"method":"ping",PARAMS}]`, -32600, false},
					{"a batch without the version header", `[{"jsonrpc":"2.0","id":9,"method":"ping",PARAMS}]`, -32600, true},
				} {
					probe := fmt.Sprintf("invalid-probe-%d", i)
					body := strings.ReplaceAll(tt.body, "PARAMS", `"params":`+c.params(probe))
					body = strings.ReplaceAll(body, "PROBE", probe)
					method := "ping"
					if strings.Contains(body, "notifications/") {
						method = "notifications/roots/list_changed"
					}
					status, ct, got := c.post(body, method, !tt.noHeader)
					var m struct {
						ID    json.RawMessage
						Error *struct {
							Code    int
							Message string
						}
					}
					json.Unmarshal(got, &m)
					if status != http.StatusBadRequest || !strings.HasPrefix(ct, "application/json") || m.Error == nil ||
						m.Error.Code != tt.code || string(m.ID) != "null" {
						t.Errorf("%s: %d %s %.300s; want 400 and a %d error with id null", tt.name, status, ct, got, tt.code)
					} else {
						t.Logf("%s: %s", tt.name, m.Error.Message)
					}
					id := fmt.Sprint(100 + i)
					if status, _, got := c.post(`{"jsonrpc":"2.0","id":`+id+`,"method":"`+valid+`","params":`+c.params("")+`}`, valid, true); status != http.StatusOK ||
						!answered(got, id) {
						t.Fatalf("%s: the %s after it: %d %.300s", tt.name, valid, status, got)
					}
					if r := received(); strings.Contains(r, probe) {
						t.Errorf("%s reached the upstream: %.300s", tt.name, r[strings.Index(r, probe)-min(strings.Index(r, probe), 200):])
					}
				}
				if r := received(); !strings.Contains(r, `"`+valid+`"`) {
					t.Errorf("the upstream's record holds no %s: %.300s", valid, r)
				}
				if stateless {
					return
				}
				// What a client may send still passes: a notification, and
				// an answer to a server request (one the upstream never
				// sent: it may ignore it).
				for _, body := range []string{`{"jsonrpc":"2.0","method":"notifications/roots/list_changed","params":{"probe":"valid-probe-1"}}`,
					`{"jsonrpc":"2.0","id":"valid-probe-2","result":{}}`} {
					if status, _, got := c.post(body, "", true); status != http.StatusAccepted {
						t.Errorf("%s: %d %.300s, want 202", body, status, got)
					}
				}
				if !up.bridged {
					// Neither is answered: wait for them to be recorded.
					eventually(t, 30*time.Second, "the notification and the response reach the upstream", func() bool {
						r := received()
						return strings.Contains(r, "valid-probe-1") && strings.Contains(r, "valid-probe-2")
					})
				}
			})
		}
		// A 2025-03-26 session, whose revision has batches (and no
		// version header): a batch is answered whole.
		t.Run(up.name+", 2025-03-26 session", func(t *testing.T) {
			args, received := up.start(t)
			base, tok := rsSpillway(t, args...)
			c := &invalidClient{t: t, url: base + "/mcp", tok: tok, version: "2025-03-26"}
			c.open()
			status, _, got := c.postAll(`[{"jsonrpc":"2.0","id":20,"method":"` + cmp.Or(up.valid, "tools/list") + `","params":{"probe":"batch-probe"}},{"jsonrpc":"2.0","id":21,"method":"ping"}]`)
			if status != http.StatusOK || !answered(got, "20") || !answered(got, "21") {
				t.Errorf("a batch: %d %.600s; want both requests answered", status, got)
			}
			if r := received(); !strings.Contains(r, "batch-probe") {
				t.Errorf("the batch never reached the upstream: %.300s", r)
			}
		})
	}
}

// invalidClient posts to one Spillway /mcp: in a session of its own
// (after open) or, in the stateless era, without one.
type invalidClient struct {
	t                 *testing.T
	url, tok, version string
	session           string
}

// open starts a session and says it is initialized.
func (c *invalidClient) open() {
	c.t.Helper()
	status, _, got := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+c.version+`","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "initialize", false)
	if status != http.StatusOK || c.session == "" {
		c.t.Fatalf("initialize: %d %.300s", status, got)
	}
	if status, _, got := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, "notifications/initialized", true); status != http.StatusAccepted {
		c.t.Fatalf("notifications/initialized: %d %.300s", status, got)
	}
}

// params are a request's params naming probe (none when empty): in the
// stateless era with the _meta every request carries.
func (c *invalidClient) params(probe string) string {
	p := map[string]any{}
	if probe != "" {
		p["probe"] = probe
	}
	if c.session == "" {
		p["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": c.version,
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "t", "version": "1"}}
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// answered reports whether got (a message, a batch of them, or events
// carrying them) holds a result for id.
func answered(got []byte, id string) bool {
	type message struct{ ID, Result json.RawMessage }
	for _, l := range bytes.Split(got, []byte("\n")) {
		l = bytes.TrimSpace(bytes.TrimPrefix(l, []byte("data:")))
		var ms []message
		if json.Unmarshal(l, &ms) != nil {
			var m message
			json.Unmarshal(l, &m)
			ms = []message{m}
		}
		for _, m := range ms {
			if string(m.ID) == id && m.Result != nil {
				return true
			}
		}
	}
	return false
}

// postAll sends body without the version header, as a 2025-03-26 client
// does, and returns the status, the content type and all it was answered.
func (c *invalidClient) postAll(body string) (int, string, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", c.session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// post sends body (with the MCP-Protocol-Version header when header) and
// returns the status, the content type and the first message answered,
// whether as JSON or as the first event of a stream.
func (c *invalidClient) post(body, method string, header bool) (int, string, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+c.tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if header {
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	} else if c.version == "2026-07-28" {
		req.Header.Set("Mcp-Method", method)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" && method == "initialize" {
		c.session = sid
	}
	ct := resp.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, ct, b
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:")); ok && len(bytes.TrimSpace(d)) > 0 {
			return resp.StatusCode, ct, bytes.TrimSpace(d)
		}
	}
	return resp.StatusCode, ct, nil
}

// TestRecordingChild is, run as `<test binary>
// -test.run=^TestRecordingChild$ -- record FILE COMMAND`, a stdio MCP
// server that records each line it is sent in FILE before it passes it on
// to COMMAND (run by sh), whose output is its own. A line the proxy sent
// before a request is thus recorded before that request is answered.
func TestRecordingChild(t *testing.T) {
	n := len(os.Args)
	if n < 4 || os.Args[n-3] != "record" {
		t.Skip("the recording child of TestHTTPAnswersInvalidBodies")
	}
	rec, err := os.OpenFile(os.Args[n-2], os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		os.Exit(1)
	}
	cmd := exec.Command("sh", "-c", "exec "+os.Args[n-1])
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	in, _ := cmd.StdinPipe()
	if cmd.Start() != nil {
		os.Exit(1)
	}
	lines := bufio.NewReaderSize(os.Stdin, 1<<16)
	for {
		l, err := lines.ReadBytes('\n')
		if len(l) > 0 {
			rec.Write(l)
			in.Write(l)
		}
		if err != nil {
			break
		}
	}
	in.Close()
	cmd.Wait()
	os.Exit(0) // before the test framework writes PASS to stdout, which is the proxy's
}

// recordingChild is the --upstream-cmd of a TestRecordingChild in front
// of command, and what it has recorded so far.
func recordingChild(t *testing.T, command string) (args []string, received func() string) {
	file := filepath.Join(t.TempDir(), "received")
	return []string{"--upstream-cmd", fmt.Sprintf("%s -test.run=^TestRecordingChild$ -- record %s '%s'", os.Args[0], file, command)}, func() string {
		b, _ := os.ReadFile(file)
		return string(b)
	}
}

// recording is a reverse proxy on loopback in front of target that keeps
// every request body it passes; received returns them all.
func recording(t *testing.T, target string) (url_ string, received func() string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var all strings.Builder
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		all.Write(b)
		all.WriteByte('\n')
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() string {
		mu.Lock()
		defer mu.Unlock()
		return all.String()
	}
}
