package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
)

// auditPost posts one JSON-RPC message to /mcp as tok, with the extra
// headers hdr, and returns the response body (an SSE stream or a JSON
// body, read whole) and its session header.
func auditPost(t *testing.T, base, tok, session, body string, hdr ...[2]string) (string, string) {
	t.Helper()
	resp := mcpPost(t, base+"/mcp", tok, session, body, hdr...)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %.80s: %s %.300s", body, resp.Status, b)
	}
	return string(b), resp.Header.Get("Mcp-Session-Id")
}

// readAuditFile parses the audit trail's JSON lines, waiting until it
// holds at least n.
func readAuditFile(t *testing.T, name string, n int) ([]map[string]any, string) {
	t.Helper()
	var raw []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		raw, _ = os.ReadFile(name)
		if strings.Count(string(raw), "\n") >= n || time.Now().After(deadline) {
			break
		}
	}
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("audit line %q is not JSON: %v", sc.Text(), err)
		}
		lines = append(lines, m)
	}
	return lines, string(raw)
}

var auditLink = regexp.MustCompile(`"httpUrl":"(http[^"]+)"`)

// bigtoolHTTP runs examples/bigtool over Streamable HTTP on loopback
// until t ends and returns its /mcp URL.
func bigtoolHTTP(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(bigtoolBin(t), "-http", "127.0.0.1:0")
	errp, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(errp).ReadString('\n') // it says where it listens
	u := regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/mcp`).FindString(line)
	if u == "" {
		t.Fatalf("bigtool -http said %q (%v)", line, err)
	}
	go io.Copy(io.Discard, errp)
	return u
}

// The done-when of the audit trail, through the real binary in front of
// examples/bigtool (over Streamable HTTP) with --audit-log and tracing on
// (an OTLP endpoint set): one offloaded tools/call, sent with a
// traceparent, and two fetches of its link (whole, then a range) write
// one offload line and two fetch lines that join on the artifact id and
// on the producing call: upstream, tool, request id, and the
// traceparent's trace id. A fetch of the link once revoked writes a line
// with the denial. The file is private, and holds neither the link's
// token nor the caller's bearer token.
func TestAuditLogJoins(t *testing.T) {
	data := t.TempDir()
	const tok, tenant = "audit-test-bearer-9f3c", "acme"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(tok+"="+tenant+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	trail := filepath.Join(t.TempDir(), "audit.jsonl")
	// Where the proxy traces its requests (OpenTelemetry, on when an
	// OTLP endpoint is configured), the call's span is the traceparent's.
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) }))
	t.Cleanup(sink.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", sink.URL+"/v1/traces")
	upstream := bigtoolHTTP(t)
	base := rsSpillwayIn(t, data, "--upstream-url", upstream, "--auth-tokens-file", tokens, "--audit-log", trail)

	_, session := auditPost(t, base, tok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"audit","version":"1"}}}`)
	auditPost(t, base, tok, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	res, _ := auditPost(t, base, tok, session, `{"jsonrpc":"2.0","id":"call-x","method":"tools/call","params":{"name":"query","arguments":{"rows":2000}}}`,
		[2]string{"traceparent", "00-" + traceID + "-00f067aa0ba902b7-01"})
	m := auditLink.FindStringSubmatch(res)
	if m == nil {
		t.Fatalf("no link in the result: %.500s", res)
	}
	link, _ := url.Parse(m[1])
	id := strings.TrimPrefix(link.Path, "/a/")
	fetched := 0
	get := func(rng string) int {
		req, _ := http.NewRequest(http.MethodGet, link.String(), nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// Its line is written once the response is out, maybe after the
		// client has it: wait for it, so the lines are in the order of
		// the fetches.
		fetched++
		readAuditFile(t, trail, 1+fetched)
		return resp.StatusCode
	}
	if s1, s2 := get(""), get("bytes=0-99"); s1 != 200 || s2 != 206 {
		t.Fatalf("fetches: %d, %d", s1, s2)
	}

	lines, _ := readAuditFile(t, trail, 3)
	var offloads, fetches []map[string]any
	for _, l := range lines {
		switch {
		case l["msg"] == artifact.AuditOffloadMsg && l["artifact"] == id:
			offloads = append(offloads, l)
		case l["msg"] == artifact.AuditFetchMsg && l["artifact"] == id:
			fetches = append(fetches, l)
		}
	}
	if len(offloads) != 1 || len(fetches) != 2 {
		t.Fatalf("%d offload and %d fetch lines of %s, want 1 and 2: %v", len(offloads), len(fetches), id, lines)
	}
	off := offloads[0]
	if off["tenant"] != tenant || off["upstream"] != strings.TrimSuffix(strings.TrimPrefix(upstream, "http://"), "/mcp") || off["tool"] != "query" || off["request_id"] != `"call-x"` ||
		off["session"] != session || off["kind"] == "" || off["size"] == 0.0 || off["mint_decision"] == "" ||
		off["offload_decision"] == "" || off["token_id"] == "" {
		t.Errorf("offload line %v", off)
	}
	for i, f := range fetches {
		for _, k := range []string{"upstream", "tool", "request_id", "trace_id"} {
			if f["call_"+k] != off[k] {
				t.Errorf("fetch %d: call_%s %v, the offload's %s %v", i, k, f["call_"+k], k, off[k])
			}
		}
		if f["tenant"] != tenant || f["via"] != artifact.ViaLink || f["token_id"] != off["token_id"] || f["decision"] == "" ||
			f["denial"] != "" || f["source"] != "127.0.0.1" {
			t.Errorf("fetch line %d: %v", i, f)
		}
	}
	if fetches[0]["status"] != 200.0 || fetches[1]["status"] != 206.0 || fetches[1]["range"] != "bytes=0-99" || fetches[1]["bytes"] != 100.0 {
		t.Errorf("fetch lines: %v", fetches)
	}
	// Requests are traced (an OTLP endpoint is set): the traceparent the
	// call came with is the call's trace, which each fetch line names.
	if off["trace_id"] != traceID || off["span_id"] == "" {
		t.Errorf("the offload's trace %v span %v, the call's traceparent had trace %s", off["trace_id"], off["span_id"], traceID)
	}

	// A revoked link: its fetch is refused, and audited with the denial.
	req, _ := http.NewRequest(http.MethodDelete, fmt.Sprintf("%s/v1/artifacts/%s/links/%s", base, id, off["token_id"]), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("revoke: %v %v", resp, err)
	}
	if s := get(""); s != http.StatusForbidden {
		t.Fatalf("the revoked link answered %d", s)
	}
	lines, raw := readAuditFile(t, trail, len(lines)+1)
	last := lines[len(lines)-1]
	if last["msg"] != artifact.AuditFetchMsg || last["artifact"] != id || last["status"] != 403.0 || last["denial"] != "link revoked" ||
		last["call_request_id"] != `"call-x"` || last["bytes"] != 0.0 {
		t.Errorf("the revoked link's line: %v", last)
	}

	if strings.Contains(raw, link.Query().Get("t")) || strings.Contains(raw, tok) {
		t.Errorf("a token is in the audit trail:\n%s", raw)
	}
	if fi, err := os.Stat(trail); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("audit trail mode: %v %v", fi.Mode(), err)
	}
}

// The audit trail is off unless asked for; the config file's audit-log
// key asks for it as the flag does (the file created private); stdout is
// refused with --stdio, whose stdout is the MCP channel; and a trail that
// cannot be opened stops the server from starting.
func TestAuditLogConfig(t *testing.T) {
	if s := startServer(t, t.TempDir()); s.deps.svc.Audit != nil {
		t.Error("an audit trail without --audit-log")
	}
	trail := filepath.Join(t.TempDir(), "trail.jsonl")
	cfg := filepath.Join(t.TempDir(), "spillway.yaml")
	if err := os.WriteFile(cfg, []byte("audit-log: "+trail+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s := startServer(t, t.TempDir(), "--config", cfg); s.deps.svc.Audit == nil {
		t.Error("audit-log in the config file opened no audit trail")
	}
	if fi, err := os.Stat(trail); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the trail file: %v %v", fi, err)
	}
	for _, args := range [][]string{
		{"--stdio", "--upstream-cmd", "cat", "--audit-log", "-"},
		{"--audit-log", filepath.Join(t.TempDir(), "no", "such", "dir", "trail")},
	} {
		fs := newFlagSet("serve")
		var c serveConfig
		c.register(fs)
		if err := parseLayered(fs, append([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir()}, args...), func(string) string { return "" }); err != nil {
			t.Fatal(err)
		}
		s, err := newServer(t.Context(), &c, slog.New(slog.DiscardHandler), io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "--audit-log") {
			if s != nil {
				s.close()
			}
			t.Errorf("%v: started (%v), want an --audit-log error", args, err)
		}
	}
}
