package mcpproxy_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/fsstore"
)

// Through a real proxy in front of an MCP Go SDK server: jq's answer
// over its 5 MB result, the whole document (`.`), is stored whole, not
// cut at 1 MiB: the answer's artifact is the document, byte for byte,
// and a line. The proxy wires its spooler to the artifact tools.
func TestJQLongAnswerEndToEnd(t *testing.T) {
	upstream, jsonText, _ := bigServer(t)
	store, err := fsstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{url: offloadingProxy(t, upstream, store)}
	a.call(t, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "jq", "version": "1"}})
	uri := decodeTool(t, a.call(t, "tools/call", map[string]any{"name": "report", "arguments": map[string]any{}})).link(t, "application/json")
	r := decodeTool(t, a.call(t, "tools/call", map[string]any{"name": "spillway_artifact_jq", "arguments": map[string]any{"uri": uri, "program": "."}}))
	if r.IsError || !strings.HasSuffix(r.Content[0].Text, ": 1 output(s)") {
		t.Fatalf("jq: %.500s", r.text())
	}
	id, _ := artifact.IDFromURI(r.link(t, "application/json"))
	rc, err := store.Open(context.Background(), id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got, _ := io.ReadAll(rc)
	if want := append(bytes.Clone(jsonText), '\n'); !bytes.Equal(got, want) {
		t.Errorf("the answer's artifact holds %d bytes, want the %d of the document and a newline", len(got), len(want))
	}
}
