package ownmethods

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/arttools"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/offload"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/schematest"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
	"github.com/spillway-dev/spillway/policy"
)

// toolEnv is newEnv with the offloader's defaults (a 6 KiB budget), as
// the command runs it, and o's other options.
func toolEnv(t *testing.T, o Options) *env {
	e := newEnv(t, nil, Options{})
	eng, err := policy.New(ctx, policy.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	o.Artifacts = e.svc
	o.Offloader = offload.New(e.svc, eng, offload.Options{Logger: slog.New(slog.DiscardHandler)})
	o.Logger = slog.New(slog.DiscardHandler)
	e.m = New(o)
	return e
}

// toolNames are the names in a tools/list result.
func toolNames(t *testing.T, result []byte) []string {
	t.Helper()
	var r struct {
		Tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		t.Fatalf("%v: %s", err, result)
	}
	var names []string
	for _, tl := range r.Tools {
		names = append(names, tl.Name)
		if tl.Name == arttools.Grep && tl.Description == "upstream's" {
			names[len(names)-1] += " (upstream's)"
		}
	}
	return names
}

// callTool is a tools/call of name with args; it returns the response.
func (e *env) callTool(t *testing.T, rq Request, name string, args map[string]any) *jsonrpc.Message {
	t.Helper()
	reply, c := e.m.Before(ctx, rq, request(t, "tools/call", map[string]any{"name": name, "arguments": args}))
	if reply == nil {
		t.Fatalf("%s was not answered by the proxy (forwarded as %+v)", name, c)
	}
	return reply
}

// toolText is a tools/call result's text and isError.
func toolText(t *testing.T, m *jsonrpc.Message) (string, bool) {
	t.Helper()
	var r struct {
		Content []struct {
			Type, Text string
		} `json:"content"`
		IsError bool `json:"isError"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &r) != nil || len(r.Content) == 0 {
		t.Fatalf("not a tool result: %s", m.Raw)
	}
	var texts []string
	for _, c := range r.Content {
		texts = append(texts, c.Text)
	}
	return strings.Join(texts, "\n"), r.IsError
}

// The tools are listed after the upstream's, on the first page only; an
// upstream tool of the same name is listed instead of ours, and its calls
// go upstream.
func TestArtifactToolsListed(t *testing.T) {
	e := toolEnv(t, Options{})
	up := `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
	ours := []string{arttools.Read, arttools.Grep, arttools.JQ}
	for _, version := range []string{"2025-11-25", Version20260728} {
		rq := Request{Version: version}
		upv := up
		if version == Version20260728 {
			upv = `{"resultType":"complete","ttlMs":0,"cacheScope":"public","tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
		}
		got := e.roundTrip(t, rq, "tools/list", map[string]any{}, response(t, upv))
		schematest.Check(t, version, "ListToolsResult", got.Result)
		if names := toolNames(t, got.Result); !slices.Equal(names, append([]string{"echo"}, ours...)) {
			t.Errorf("%s: first page lists %v", version, names)
		}
		got = e.roundTrip(t, rq, "tools/list", map[string]any{"cursor": "p2"}, response(t, upv))
		if names := toolNames(t, got.Result); !slices.Equal(names, []string{"echo"}) {
			t.Errorf("%s: a cursor page lists %v", version, names)
		}
		got = e.roundTrip(t, rq, "tools/list", map[string]any{}, errorResponse(jsonrpc.CodeMethodNotFound))
		schematest.Check(t, version, "ListToolsResult", got.Result)
		if names := toolNames(t, got.Result); !slices.Equal(names, ours) {
			t.Errorf("%s: an upstream without tools: %v", version, names)
		}
	}
	init := e.roundTrip(t, Request{}, "initialize", map[string]any{}, response(t, `{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"u","version":"1"}}`))
	if string(jsonrpc.Path(init.Result, "capabilities", "tools")) != "{}" {
		t.Errorf("initialize does not declare tools: %s", init.Result)
	}

	off := toolEnv(t, Options{NoArtifactTools: true})
	got := off.roundTrip(t, Request{}, "tools/list", map[string]any{}, response(t, up))
	if names := toolNames(t, got.Result); !slices.Equal(names, []string{"echo"}) {
		t.Errorf("tools off: %v", names)
	}
	if reply, _ := off.m.Before(ctx, Request{}, request(t, "tools/call", map[string]any{"name": arttools.Read})); reply != nil {
		t.Errorf("tools off: a call was answered: %s", reply.Raw)
	}

	shadow := `{"tools":[{"name":"echo","inputSchema":{"type":"object"}},{"name":"spillway_artifact_grep","description":"upstream's","inputSchema":{"type":"object"}}]}`
	got = e.roundTrip(t, Request{}, "tools/list", map[string]any{}, response(t, shadow))
	if names := toolNames(t, got.Result); !slices.Equal(names, []string{"echo", arttools.Grep + " (upstream's)", arttools.Read, arttools.JQ}) {
		t.Errorf("shadowed: %v", names)
	}
	if reply, c := e.m.Before(ctx, Request{}, request(t, "tools/call", map[string]any{"name": arttools.Grep})); reply != nil || c == nil || c.Tool != arttools.Grep {
		t.Errorf("a call of the upstream's grep was not forwarded: %v %+v", reply, c)
	}
	e.callTool(t, Request{}, arttools.Read, nil) // ours still answered
}

// Each tool answers on the caller's artifact, a valid result in both
// eras; bad input is a tool error, never a JSON-RPC error.
func TestArtifactToolsAnswer(t *testing.T) {
	e := toolEnv(t, Options{})
	a := e.publish(t, "acme", "application/json", []byte("[{\"id\":1,\"s\":\"x\"},\r\n{\"id\":2,\"s\":\"y\"}]"))
	uri := artifact.URI(a.ID)
	for _, version := range []string{"2025-11-25", Version20260728} {
		rq := Request{Tenant: "acme", Version: version}
		for _, tc := range []struct {
			tool string
			args map[string]any
			want string
		}{
			{arttools.Read, map[string]any{"uri": uri, "offset": 2}, uri + " lines 2-2 of 2 (end)\n     2\t{\"id\":2,\"s\":\"y\"}]\n"},
			{arttools.Grep, map[string]any{"uri": uri, "pattern": `"s":"x"`}, uri + ": 1 matching lines for /\"s\":\"x\"/ in 2 lines\n1:[{\"id\":1,\"s\":\"x\"},\n"},
			{arttools.JQ, map[string]any{"uri": uri, "program": "map(.id) | add"}, uri + ": jq map(.id) | add over 1 input value(s): 1 output(s)\n3\n"},
		} {
			got := e.callTool(t, rq, tc.tool, tc.args)
			schematest.Check(t, version, "CallToolResult", got.Result)
			if text, isErr := toolText(t, got); isErr || text != tc.want {
				t.Errorf("%s %s: %q (isError %v), want %q", version, tc.tool, text, isErr, tc.want)
			}
		}
		for _, tc := range []struct {
			tool    string
			args    map[string]any
			wantErr string
		}{
			{arttools.Grep, map[string]any{"uri": uri, "pattern": "(x"}, "pattern: missing closing )"},
			{arttools.JQ, map[string]any{"uri": uri, "program": "map(", "format": "json"}, "jq program:"},
			{arttools.JQ, map[string]any{"uri": uri, "program": ".", "format": "ndjson"}, "not NDJSON: line 1"},
			{arttools.Read, map[string]any{"uri": uri, "offset": 3}, "past the last line: the artifact has 2 lines"},
			{arttools.Read, map[string]any{"uri": uri, "byteOffset": 1000}, "past the end: the artifact is"},
			{arttools.Read, map[string]any{}, "uri is required"},
		} {
			got := e.callTool(t, rq, tc.tool, tc.args)
			schematest.Check(t, version, "CallToolResult", got.Result)
			if text, isErr := toolText(t, got); !isErr || !strings.Contains(text, tc.wantErr) {
				t.Errorf("%s %s %v: %q (isError %v), want %q", version, tc.tool, tc.args, text, isErr, tc.wantErr)
			}
		}
	}
}

// Another tenant's artifact is answered exactly as an unknown one; one
// the policy denies with the policy's reason (the access rule of
// resources/read).
func TestArtifactToolsAccessRule(t *testing.T) {
	e := newEnvPolicy(t, nil, Options{}, accessPolicy)
	mine := e.publishNamed(t, "plain.txt", "a", "text/plain", []byte("[\"one\",\n\"two\"]\n"))
	secret := e.publishNamed(t, "secret.txt", "a", "text/plain", []byte("one\ntwo\n"))
	unknown := artifact.NewID()
	for _, tool := range arttools.Names {
		args := func(id string) map[string]any {
			return map[string]any{"uri": artifact.URI(id), "pattern": "o", "program": "."}
		}
		theirs, isErr := toolText(t, e.callTool(t, Request{Tenant: "b"}, tool, args(mine.ID)))
		none, _ := toolText(t, e.callTool(t, Request{Tenant: "b"}, tool, args(unknown)))
		if !isErr || theirs != "resource not found: "+artifact.URI(mine.ID) || strings.ReplaceAll(none, unknown, mine.ID) != theirs {
			t.Errorf("%s: another tenant's artifact: %q (isError %v); an unknown one: %q", tool, theirs, isErr, none)
		}
		if text, isErr := toolText(t, e.callTool(t, Request{Tenant: "a"}, tool, args(secret.ID))); !isErr || text != "denied by policy: not for MCP clients" {
			t.Errorf("%s: a denied artifact: %q (isError %v)", tool, text, isErr)
		}
		if text, isErr := toolText(t, e.callTool(t, Request{Tenant: "a"}, tool, map[string]any{"uri": artifact.URI(mine.ID), "pattern": "o", "program": "1"})); isErr {
			t.Errorf("%s: the owner's artifact: %q", tool, text)
		}
	}
}

// An answer over the offloader's budget is offloaded like an upstream
// result: a preview and a link whose bytes are the whole answer, the
// caller's own. Without an offloader it is cut at 64 KiB and says so.
func TestArtifactToolsLargeAnswer(t *testing.T) {
	e := toolEnv(t, Options{})
	var data, want bytes.Buffer
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&data, "row %d: %s\n", i, strings.Repeat("ab", i%20))
	}
	a := e.publish(t, "acme", "text/plain", data.Bytes())
	uri := artifact.URI(a.ID)
	fmt.Fprintf(&want, "%s lines 1-2000 (more follow: offset=2001)\n", uri)
	for i, l := range strings.Split(data.String(), "\n")[:2000] {
		fmt.Fprintf(&want, "%6d\t%s\n", i+1, l)
	}
	got := e.callTool(t, Request{Tenant: "acme"}, arttools.Read, map[string]any{"uri": uri, "limit": 2000})
	if len(got.Raw) > 8<<10 || !bytes.Contains(got.Result, []byte(`"resource_link"`)) {
		t.Fatalf("%d bytes, no link: %.500s", len(got.Raw), got.Raw)
	}
	var r struct {
		Content []struct {
			Type, URI string
		} `json:"content"`
	}
	json.Unmarshal(got.Result, &r)
	var linked string
	for _, c := range r.Content {
		if c.Type == "resource_link" {
			linked = c.URI
		}
	}
	id, _ := artifact.IDFromURI(linked)
	meta, err := e.svc.Owned(ctx, id, "acme")
	if err != nil {
		t.Fatalf("the answer's artifact is not the caller's: %v", err)
	}
	rc, err := e.svc.Store.Open(ctx, id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	full, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(full, want.Bytes()) {
		t.Errorf("the link holds %d bytes (%s), want the %d-byte answer", len(full), meta.MimeType, want.Len())
	}
	// The answer's own artifact is readable by the tools in turn (its
	// line 2000 is the artifact's line 1999: the header comes first).
	if text, isErr := toolText(t, e.callTool(t, Request{Tenant: "acme"}, arttools.Grep, map[string]any{"uri": linked, "pattern": `^ +1999\t`})); isErr || !strings.Contains(text, "2000:  1999\trow 1999: ") {
		t.Errorf("grep of the answer: %q", text)
	}

	plain := New(Options{Artifacts: e.svc, Logger: slog.New(slog.DiscardHandler)})
	reply, _ := plain.Before(ctx, Request{Tenant: "acme"}, request(t, "tools/call", map[string]any{"name": arttools.Read, "arguments": map[string]any{"uri": uri, "limit": 5000}}))
	text, isErr := toolText(t, reply)
	if isErr || len(text) > maxToolAnswer+200 || !strings.HasSuffix(text, fmt.Sprintf("[answer cut at %d bytes: ask for a smaller window or fewer results]", maxToolAnswer)) {
		t.Errorf("no offloader: %d bytes, isError %v, ends %q", len(text), isErr, text[max(0, len(text)-100):])
	}
}

// fullAnswer is a tool's whole answer: its text, or, when it was
// offloaded, the bytes of its link.
func (e *env) fullAnswer(t *testing.T, reply *jsonrpc.Message) string {
	t.Helper()
	text, isErr := toolText(t, reply)
	if isErr {
		t.Fatalf("tool error: %s", text)
	}
	var r struct {
		Content []struct{ Type, URI string } `json:"content"`
	}
	json.Unmarshal(reply.Result, &r)
	for _, c := range r.Content {
		if c.Type != "resource_link" {
			continue
		}
		id, _ := artifact.IDFromURI(c.URI)
		rc, err := e.svc.Store.Open(ctx, id, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return string(b)
	}
	return text
}

// The tools over the preview engine's corpus of realistic outputs, each
// answer checked against values the test computes from the fixture.
func TestArtifactToolsCorpus(t *testing.T) {
	e := toolEnv(t, Options{})
	rq := Request{Tenant: "acme"}
	dir := filepath.Join("..", "..", "..", "..", "artifact", "preview", "testdata", "corpus")
	load := func(name string) ([]byte, string) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b, artifact.URI(e.publishNamed(t, name, "acme", "application/octet-stream", b).ID)
	}
	call := func(tool, uri string, args map[string]any) string {
		t.Helper()
		args["uri"] = uri
		_, body, _ := strings.Cut(e.fullAnswer(t, e.callTool(t, rq, tool, args)), "\n")
		return body
	}

	// An API list response: refunded amounts, from the fixture's rows.
	b, uri := load("api_list.json")
	var api struct {
		Data []struct {
			Amount int64  `json:"amount"`
			Status string `json:"status"`
		} `json:"data"`
		TotalCount int `json:"total_count"`
	}
	json.Unmarshal(b, &api)
	var refunded int64
	for _, c := range api.Data {
		if c.Status == "refunded" {
			refunded += c.Amount
		}
	}
	if got, want := call(arttools.JQ, uri, map[string]any{"program": `(.data | length), .total_count, ([.data[] | select(.status == "refunded") | .amount] | add)`}),
		fmt.Sprintf("%d\n%d\n%d\n", len(api.Data), api.TotalCount, refunded); got != want {
		t.Errorf("api_list: %q, want %q", got, want)
	}

	// A database envelope and a git diff summary.
	b, uri = load("db_envelope.json")
	var db struct {
		Data struct {
			Statements []struct {
				Columns []string         `json:"columns"`
				Count   int              `json:"count"`
				Rows    []map[string]any `json:"rows"`
			} `json:"statements"`
		} `json:"data"`
	}
	json.Unmarshal(b, &db)
	st := db.Data.Statements[0]
	if got, want := call(arttools.JQ, uri, map[string]any{"program": `.data.statements[0] | .count, (.rows | length), .columns[-1], .rows[-1].order_id`, "format": "json"}),
		fmt.Sprintf("%d\n%d\n%q\n%v\n", st.Count, len(st.Rows), st.Columns[len(st.Columns)-1], st.Rows[len(st.Rows)-1]["order_id"]); got != want {
		t.Errorf("db_envelope: %q, want %q", got, want)
	}
	b, uri = load("git_diff.json")
	var diff struct {
		Deletions int `json:"deletions"`
		Files     []struct {
			Deletions int `json:"deletions"`
		} `json:"files"`
	}
	json.Unmarshal(b, &diff)
	sum := 0
	for _, f := range diff.Files {
		sum += f.Deletions
	}
	if got, want := call(arttools.JQ, uri, map[string]any{"program": `.deletions, (.files | length), ([.files[].deletions] | add)`}),
		fmt.Sprintf("%d\n%d\n%d\n", diff.Deletions, len(diff.Files), sum); got != want {
		t.Errorf("git_diff: %q, want %q", got, want)
	}

	// NDJSON events: the slow errors' users, line by line.
	b, uri = load("events.ndjson")
	var users []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var ev struct {
			Level    string `json:"level"`
			Duration int    `json:"duration_ms"`
			User     int    `json:"user_id"`
		}
		json.Unmarshal([]byte(l), &ev)
		if ev.Level == "error" && ev.Duration > 800 {
			users = append(users, fmt.Sprint(ev.User))
		}
	}
	if got, want := call(arttools.JQ, uri, map[string]any{"program": `select(.level == "error" and .duration_ms > 800) | .user_id`, "format": "ndjson", "maxOutputs": 10000}),
		strings.Join(users, "\n")+"\n"; len(users) == 0 || got != want {
		t.Errorf("events: %d users; got %q", len(users), got)
	}

	// The application log: every ERROR line, numbered as in the file.
	b, uri = load("app.log")
	lines := strings.Split(string(b), "\n")
	var errLines []string
	for i, l := range lines {
		if strings.Contains(l, " ERROR ") {
			errLines = append(errLines, fmt.Sprintf("%d:%s", i+1, l))
		}
	}
	if got := call(arttools.Grep, uri, map[string]any{"pattern": " ERROR ", "maxMatches": 1000}); len(errLines) == 0 || got != strings.Join(errLines, "\n")+"\n" {
		t.Errorf("app.log: %d ERROR lines; grep answered %.300q", len(errLines), got)
	}

	// A CSV with quoted fields and non-ASCII names: a window of lines, and
	// a byte window starting inside "ü".
	b, uri = load("orders.csv")
	lines = strings.Split(string(b), "\n")
	if got, want := call(arttools.Read, uri, map[string]any{"offset": 2, "limit": 3}),
		fmt.Sprintf("%6d\t%s\n%6d\t%s\n%6d\t%s\n", 2, lines[1], 3, lines[2], 4, lines[3]); got != want {
		t.Errorf("orders.csv lines: %q, want %q", got, want)
	}
	u := bytes.Index(b, []byte("ü"))
	if got, want := call(arttools.Read, uri, map[string]any{"byteOffset": u + 1, "byteLength": 40}), string(b[u+2:u+41]); u < 0 || got != want {
		t.Errorf("orders.csv bytes from inside ü: %q, want %q", got, want)
	}
}

// A tools/list whose tools array the transport moved to disk (10,000
// tools) is put back in memory to be extended with the artifact tools,
// and its spilled array is freed at once: before, it waited on disk for
// its TTL, counted against the spill space.
func TestSpilledToolsListExtended(t *testing.T) {
	sp, err := spill.New(spill.Options{Dir: t.TempDir(), ArrayThreshold: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	var tools []string
	for i := range 200 {
		tools = append(tools, fmt.Sprintf(`{"name":"t%d","inputSchema":{"type":"object"}}`, i))
	}
	raw, err := sp.Read(strings.NewReader(`{"jsonrpc":"2.0","id":7,"result":{"tools":[`+strings.Join(tools, ",")+`]}}`), 0)
	if err != nil || !spill.HasMarkers(raw) {
		t.Fatalf("the tools array did not spill: %v %s", err, raw)
	}
	up, err := jsonrpc.DecodeMessage(raw)
	if err != nil {
		t.Fatal(err)
	}
	got := toolEnv(t, Options{}).roundTrip(t, Request{}, "tools/list", map[string]any{}, up)
	names := toolNames(t, got.Result)
	if len(names) != 203 || names[0] != "t0" || names[200] != arttools.Read {
		t.Fatalf("listed %d tools: %v…", len(names), names[:min(len(names), 3)])
	}
	if n := sp.Alive(); n != 0 {
		t.Errorf("%d bytes still spilled after the list was put back in memory", n)
	}
}
