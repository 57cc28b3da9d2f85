package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/policy/policytest"
)

// The outputSchemas rowsserver.mjs declares for report: strict is what
// pydantic or Zod write for a model with extra="forbid" and a list of at
// least 50 rows; loose names rows and nothing more.
const (
	rsStrictRows = `{"type":"object","additionalProperties":false,"required":["rows"],"properties":{"rows":{"type":"array","minItems":50,` +
		`"items":{"type":"object","additionalProperties":false,"required":["id","name","note"],` +
		`"properties":{"id":{"type":"integer"},"name":{"type":"string"},"note":{"type":"string"}}}}}}`
	rsLooseRows = `{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object"}}}}`
	// rsClosedRows takes any number of rows, and no member it does not
	// name: Spillway shows it with room for its note.
	rsClosedRows = `{"type":"object","additionalProperties":false,"required":["rows"],"properties":{"rows":{"type":"array","items":{"type":"object"}}}}`
)

// rsRowsUpstreams starts rowsserver.mjs over HTTP and returns, for each
// of stdio and http, the flags that put Spillway in front of it, and the
// file its schema is read from at each tools/list (strict to begin with).
func rsRowsUpstreams(t *testing.T, rt rsTools) (through map[string][]string, schemaFile string) {
	t.Helper()
	schemaFile = filepath.Join(t.TempDir(), "schema.json")
	rsWrite(t, schemaFile, []byte(rsStrictRows))
	script := filepath.Join(rt.scripts, "rowsserver.mjs")
	return map[string][]string{
		"stdio": {"--upstream-cmd", rt.node + " " + script + " stdio " + schemaFile, "--upstream-env", "SPILLWAY_NPM=" + rt.npm},
		"http":  {"--upstream-url", rsHTTPServer(t, rt, "rowsserver.mjs", "http", schemaFile)},
	}, schemaFile
}

// rsCached is a cachedclient.mjs that has listed the tools and waits to
// call report.
type rsCached struct {
	t   *testing.T
	in  io.WriteCloser
	dec *json.Decoder
}

// rsCachedClient runs cachedclient.mjs on sdk ("v1" or "v2pin"): it lists
// the tools through url and holds the list.
func rsCachedClient(t *testing.T, rt rsTools, sdk, url, token string) *rsCached {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a deadlock guard
	stderr := new(policytest.Buffer)
	cmd, in, out := rt.start(t, ctx, stderr, "cachedclient.mjs", sdk, url, token, "report")
	t.Cleanup(func() {
		defer cancel()
		in.Close()
		io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil {
			t.Errorf("cachedclient %s: %v; stderr:\n%s", sdk, err, rsTail(stderr.String()))
		}
	})
	c := &rsCached{t: t, in: in, dec: json.NewDecoder(bufio.NewReader(out))}
	var head struct {
		Tools []string `json:"tools"`
		Error string   `json:"error"`
	}
	if err := c.dec.Decode(&head); err != nil || head.Error != "" || !strings.Contains(strings.Join(head.Tools, " "), "report") {
		t.Fatalf("cachedclient %s: %v, listed %v, error %q; stderr:\n%s", sdk, err, head.Tools, head.Error, rsTail(stderr.String()))
	}
	return c
}

// rsCachedReport is what cachedclient.mjs printed for its call: the
// result after the SDK's own check, or the error it threw.
type rsCachedReport struct {
	Result json.RawMessage `json:"result"`
	Error  string          `json:"error"`
}

// call makes the client call report through url, with the list it holds.
func (c *rsCached) call(url, token string) rsCachedReport {
	c.t.Helper()
	line, _ := json.Marshal(map[string]string{"url": url, "token": token})
	if _, err := c.in.Write(append(line, '\n')); err != nil {
		c.t.Fatal(err)
	}
	var rep rsCachedReport
	if err := c.dec.Decode(&rep); err != nil {
		c.t.Fatalf("cachedclient: %v", err)
	}
	return rep
}

// done ends the client without a call.
func (c *rsCached) done() { c.in.Write([]byte(`{"url":""}` + "\n")) }

// rsCheckRows checks report's 300 rows as the client got them: its SDK
// took the result (checked against the schema it holds), and the rows
// went to a link instead of inline. With shrunk, the schema lets rows be
// cut: a few stay inline, with Spillway's note.
func rsCheckRows(t *testing.T, rep rsCachedReport, shrunk bool) {
	t.Helper()
	if rep.Error != "" {
		t.Fatalf("the client refused the result: %s", rep.Error)
	}
	result := rep.Result
	var res rsResult
	if err := json.Unmarshal(result, &res); err != nil {
		t.Fatal(err)
	}
	var sc struct {
		Rows []json.RawMessage `json:"rows"`
		Note string            `json:"_spillway"`
	}
	json.Unmarshal(res.Structured, &sc)
	if len(res.Meta.Replaced) == 0 || len(sc.Rows) == 300 {
		t.Fatalf("no link, or all 300 rows inline: %.600s", result)
	}
	if shrunk && (res.IsError || len(sc.Rows) == 0 || sc.Note == "") {
		t.Errorf("the schema lets rows be cut, and was not learned: %.600s", result)
	}
	sum := rsGet(t, res.Meta.Replaced[0].HTTPURL)
	if sum != res.Meta.Replaced[0].SHA256 {
		t.Errorf("link %s: bytes with SHA-256 %s, _meta says %s", res.Meta.Replaced[0].HTTPURL, sum, res.Meta.Replaced[0].SHA256)
	}
	t.Logf("isError %v, %d rows inline, %d links, %d bytes", res.IsError, len(sc.Rows), len(res.Meta.Replaced), len(result))
}

// TestRealServersSchemaUnseen: a client holds the tool list from before
// (its SDK checks each structuredContent against the outputSchemas in
// it) and calls through a Spillway process that never saw a tools/list:
// a restart, another replica. The TypeScript SDK v1 client keeps its
// schemas across the reconnection; the v2 client pinned to 2026-07-28 is
// handed the cached tool definition. Spillway learns the schema as the
// caller before it shrinks; before, it cut the 300 rows to five and added
// _spillway against no schema, and every client threw "Structured content
// does not match the tool's output schema" (minItems 50).
//
// With a schema that lets rows be cut (closed), the rows are cut against
// it, with the note it was shown room for: the schema was learned, not
// merely refused as unknown.
func TestRealServersSchemaUnseen(t *testing.T) {
	rt := rsSetup(t)
	through, schemaFile := rsRowsUpstreams(t, rt)
	for _, schema := range []string{"strict", "closed"} {
		rsWrite(t, schemaFile, []byte(map[string]string{"strict": rsStrictRows, "closed": rsClosedRows}[schema]))
		for _, mode := range []string{"stdio", "http"} {
			for _, sdk := range []string{"v1", "v2pin"} {
				t.Run(schema+"/"+mode+"/"+sdk, func(t *testing.T) {
					first, tok1 := rsSpillway(t, through[mode]...)
					c := rsCachedClient(t, rt, sdk, first+"/mcp", tok1)
					fresh, tok2 := rsSpillway(t, through[mode]...)
					rsCheckRows(t, c.call(fresh+"/mcp", tok2), schema == "closed")
				})
			}
		}
	}
}

// TestRealServersSchemaPerTenant: tenant B lists report's strict schema;
// the upstream then shows tenant A a loose one for the same name. B's
// result is shrunk against what B was shown, and B's SDK takes it.
// Before, the schemas were one table across tenants: A's listing decided
// B's shrink, and B's client threw (five rows for minItems 50).
func TestRealServersSchemaPerTenant(t *testing.T) {
	rt := rsSetup(t)
	through, schemaFile := rsRowsUpstreams(t, rt)
	const tokA, tokB = "tenant-a-token-0123456789abcdef", "tenant-b-token-0123456789abcdef"
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(tokA+"=alpha\n"+tokB+"=beta\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"stdio", "http"} {
		for _, sdk := range []string{"v1", "v2pin"} {
			t.Run(mode+"/"+sdk, func(t *testing.T) {
				base := rsSpillwayIn(t, t.TempDir(), append([]string{"--auth-tokens-file", tokens}, through[mode]...)...)
				rsWrite(t, schemaFile, []byte(rsStrictRows))
				b := rsCachedClient(t, rt, sdk, base+"/mcp", tokB)
				rsWrite(t, schemaFile, []byte(rsLooseRows))
				rsCachedClient(t, rt, sdk, base+"/mcp", tokA).done()
				rsCheckRows(t, b.call(base+"/mcp", tokB), false)
			})
		}
	}
}
