package offload

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg"
	"image/png"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/schematest"
	"github.com/spillway-dev/spillway/mcpproxy/internal/results/shrink"
	"github.com/spillway-dev/spillway/policy"
)

// The outputSchema @modelcontextprotocol/server-filesystem declares for
// read_text_file (and most of its tools), as it sends it.
const fsTextSchema = `{"type":"object","properties":{"content":{"type":"string"}},"required":["content"],"$schema":"http://json-schema.org/draft-07/schema#","additionalProperties":false}`

// presented lists one tool with schema through Schemas.Present and
// returns what the client is shown and what the rewriter gets.
func presented(t *testing.T, schema string) (string, *shrink.Schema) {
	t.Helper()
	var s Schemas
	out := s.Present([]byte(`{"tools":[{"name":"t","inputSchema":{"type":"object"},"outputSchema":` + schema + `}]}`))
	sch, err := s.Lookup("t")
	if sch == nil || err != nil {
		t.Fatalf("schema not learned: %s", out)
	}
	return string(jsonrawPath(t, out, "tools", 0, "outputSchema")), sch
}

func jsonrawPath(t *testing.T, b []byte, path ...any) json.RawMessage {
	t.Helper()
	var v any = json.RawMessage(b)
	for _, p := range path {
		var next json.RawMessage
		switch k := p.(type) {
		case string:
			var m map[string]json.RawMessage
			if err := json.Unmarshal(v.(json.RawMessage), &m); err != nil {
				t.Fatal(err)
			}
			next = m[k]
		case int:
			var a []json.RawMessage
			if err := json.Unmarshal(v.(json.RawMessage), &a); err != nil {
				t.Fatal(err)
			}
			next = a[k]
		}
		v = next
	}
	return v.(json.RawMessage)
}

type callResult struct {
	Content           []map[string]any           `json:"content"`
	StructuredContent map[string]json.RawMessage `json:"structuredContent"`
	IsError           bool                       `json:"isError"`
	Meta              struct {
		Replaced []replaced `json:"dev.spillway/replaced"`
	} `json:"_meta"`
}

func fetchArtifact(t *testing.T, svc *artifact.Service, uri string) []byte {
	t.Helper()
	id, ok := artifact.IDFromURI(uri)
	if !ok {
		t.Fatalf("not an artifact URI: %s", uri)
	}
	rc, err := svc.Store.Open(context.Background(), id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return b
}

// checkSmall asserts what every offloaded result must be: schema-valid,
// under 8 KB, and carrying each of its links in the text of content and
// in structuredContent alike.
func checkSmall(t *testing.T, out []byte, r callResult) {
	t.Helper()
	schematest.Check(t, "2025-11-25", "CallToolResult", out)
	if len(out) >= 8000 {
		t.Errorf("the result is %d bytes, want < 8000:\n%.3000s", len(out), out)
	}
	var texts strings.Builder
	for _, it := range r.Content {
		if s, ok := it["text"].(string); ok {
			texts.WriteString(s)
		}
	}
	sc, _ := json.Marshal(r.StructuredContent)
	for _, rep := range r.Meta.Replaced {
		if !strings.Contains(texts.String(), rep.HTTPURL) {
			t.Errorf("%s: its link is in no text of content", rep.Pointer)
		}
		if r.StructuredContent != nil && !bytes.Contains(sc, []byte(rep.HTTPURL)) {
			t.Errorf("%s: its link is not in structuredContent", rep.Pointer)
		}
	}
}

// server-filesystem's read_text_file: the text twice, in content and in
// structuredContent. Both become one artifact and one link, and the
// shrunk structuredContent validates against the schema the client was
// shown.
func TestOffloadTextRepeatedInStructuredContent(t *testing.T) {
	svc := testService(t, nil)
	shown, sch := presented(t, fsTextSchema)
	if !strings.Contains(shown, `"`+NoteMember+`"`) {
		t.Errorf("a closed schema is shown without %s: %s", NoteMember, shown)
	}
	log := strings.Repeat("2026-11-26T10:00:00Z INFO request served path=/x status=200\n", 20000)
	in, _ := json.Marshal(map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": log}},
		"structuredContent": map[string]any{"content": log},
	})
	r, stored := rewriteSmall(t, svc, Call{Method: "tools/call", Tool: "t", Schema: sch}, in)
	if len(stored) != 1 {
		t.Fatalf("stored %d artifacts, want 1 (the text, once)", len(stored))
	}
	if got := fetchArtifact(t, svc, artifact.URI(stored[0].ID)); string(got) != log {
		t.Errorf("the artifact holds %d bytes, want the log's %d", len(got), len(log))
	}
	if len(r.Meta.Replaced) != 2 || r.Meta.Replaced[1].Pointer != "/structuredContent/content" {
		t.Errorf("replaced: %+v", r.Meta.Replaced)
	}
	if err := sch.Validate(mustJSON(r.StructuredContent)); err != nil {
		t.Errorf("structuredContent does not validate against the presented schema: %v", err)
	}
}

// rewriteSmall rewrites in with the defaults and checks the result
// with checkSmall.
func rewriteSmall(t *testing.T, svc *artifact.Service, c Call, in []byte) (callResult, []artifact.Artifact) {
	t.Helper()
	out, stored, err := New(svc, builtInPolicy(t), Options{}).Rewrite(context.Background(), c, in)
	if err != nil {
		t.Fatal(err)
	}
	var r callResult
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatal(err)
	}
	checkSmall(t, out, r)
	return r, stored
}

// builtInPolicy is the policy Spillway runs without --policy: what
// decides about each unit a rewrite offloads (a structured member once
// found no threshold in it and stayed inline).
func builtInPolicy(t *testing.T) *policy.Engine {
	t.Helper()
	eng, err := policy.New(t.Context(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// FastMCP's shape for a tool returning a list: one text item per row, and
// the rows again in structuredContent.result. The items become one JSON
// array artifact, the rows a second; the result stays small.
func TestOffloadManySmallItems(t *testing.T) {
	svc := testService(t, nil)
	var items []any
	var rows []any
	for i := range 2000 {
		row := map[string]any{"id": i, "status": []string{"open", "closed"}[i%2], "amount": i * 7}
		rows = append(rows, row)
		items = append(items, map[string]any{"type": "text", "text": string(mustJSON(row))})
	}
	in, _ := json.Marshal(map[string]any{"content": items, "structuredContent": map[string]any{"result": rows}})
	r, stored := rewriteSmall(t, svc, Call{Method: "tools/call", Tool: "rows"}, in)
	if len(stored) != 2 {
		t.Fatalf("stored %d artifacts, want 2 (the items as one, the rows)", len(stored))
	}
	var group []any
	if err := json.Unmarshal(fetchArtifact(t, svc, artifact.URI(stored[0].ID)), &group); err != nil || len(group) != 2000 {
		t.Errorf("the items' artifact: %d rows (%v), want a JSON array of 2000", len(group), err)
	}
	wantRows := mustJSON(rows)
	if got := fetchArtifact(t, svc, artifact.URI(stored[1].ID)); !bytes.Equal(got, wantRows) {
		t.Errorf("the rows' artifact differs from structuredContent.result as sent")
	}
	if r.Meta.Replaced[0].Count != 2000 {
		t.Errorf("the group's entry: %+v", r.Meta.Replaced[0])
	}
}

// A PDF reader's 120 page items of about 3 KB: one text artifact, the
// pages separated by a blank line.
func TestOffloadPagesAsOneText(t *testing.T) {
	svc := testService(t, nil)
	var items []any
	var pages []string
	for i := range 120 {
		p := fmt.Sprintf("Page %d\n%s", i+1, strings.Repeat("lorem ipsum dolor sit amet ", 110))
		pages = append(pages, p)
		items = append(items, map[string]any{"type": "text", "text": p})
	}
	in, _ := json.Marshal(map[string]any{"content": items})
	_, stored := rewriteSmall(t, svc, Call{Method: "tools/call", Tool: "pdf"}, in)
	if len(stored) != 1 {
		t.Fatalf("stored %d artifacts, want 1", len(stored))
	}
	if got := fetchArtifact(t, svc, artifact.URI(stored[0].ID)); string(got) != strings.Join(pages, "\n\n") {
		t.Errorf("the pages' artifact is not the pages joined by a blank line")
	}
}

// An image repeated in structuredContent (server-filesystem's
// read_media_file): one artifact, the decoded image.
func TestOffloadImageRepeatedInStructuredContent(t *testing.T) {
	svc := testService(t, nil)
	schema := `{"type":"object","properties":{"content":{"type":"array","items":{"type":"object","properties":{"type":{"type":"string","enum":["image","audio"]},"data":{"type":"string"},"mimeType":{"type":"string"}},"required":["type","data","mimeType"],"additionalProperties":false}}},"required":["content"],"additionalProperties":false}`
	_, sch := presented(t, schema)
	img := bytes.Repeat([]byte{0x89, 'P', 'N', 'G', 1, 2, 3, 4, 5, 6}, 30000)
	data := base64.StdEncoding.EncodeToString(img)
	item := map[string]any{"type": "image", "data": data, "mimeType": "image/png"}
	in, _ := json.Marshal(map[string]any{"content": []any{item}, "structuredContent": map[string]any{"content": []any{item}}})
	r, stored := rewriteSmall(t, svc, Call{Method: "tools/call", Tool: "t", Schema: sch}, in)
	if len(stored) != 1 || !bytes.Equal(fetchArtifact(t, svc, artifact.URI(stored[0].ID)), img) {
		t.Fatalf("want one artifact holding the decoded image; stored %d", len(stored))
	}
	if err := sch.Validate(mustJSON(r.StructuredContent)); err != nil {
		t.Errorf("structuredContent does not validate: %v", err)
	}
}

// A schema that no small value satisfies (a thousand items at least):
// the result becomes a tool error without structuredContent, which
// clients do not check against the schema, and the value a link.
func TestOffloadNoSmallValidValue(t *testing.T) {
	svc := testService(t, nil)
	_, sch := presented(t, `{"type":"object","properties":{"rows":{"type":"array","minItems":1000,"items":{"type":"object"}}},"required":["rows"]}`)
	var rows []any
	for i := range 1000 {
		rows = append(rows, map[string]any{"id": i, "name": strings.Repeat("n", 40)})
	}
	sc := map[string]any{"rows": rows}
	in, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": "1000 rows"}}, "structuredContent": sc})
	r, _ := rewriteSmall(t, svc, Call{Method: "tools/call", Tool: "t", Schema: sch}, in)
	if !r.IsError || r.StructuredContent != nil {
		t.Fatalf("want a tool error without structuredContent: %+v", r)
	}
	if len(r.Content) != 2 || r.Content[0]["text"] != "1000 rows" {
		t.Errorf("the server's own content item is lost: %v", r.Content)
	}
	if n := len(r.Meta.Replaced); n != 1 || r.Meta.Replaced[0].Pointer != "/structuredContent" {
		t.Fatalf("replaced: %+v, want /structuredContent alone", r.Meta.Replaced)
	}
	if !bytes.Equal(fetchArtifact(t, svc, r.Meta.Replaced[0].URI), mustJSON(sc)) {
		t.Errorf("the structuredContent's artifact is not the value as sent")
	}
}

// Within the budget nothing changes, byte for byte; tools/list of open
// schemas is shown as it came.
func TestOffloadSmallResultUnchanged(t *testing.T) {
	in := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 3000) + `"}], "structuredContent":{"a":[1,2,3]},"_meta":{"k":1}}`)
	out, stored, err := New(testService(t, nil), threshold{0}, Options{}).Rewrite(context.Background(), Call{Method: "tools/call", Tool: "t"}, in)
	if err != nil || len(stored) != 0 || !bytes.Equal(out, in) {
		t.Errorf("a small result changed (%v, %d stored)", err, len(stored))
	}
	var s Schemas
	list := []byte(`{"tools":[{"name":"a","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"x":{"type":"string"}}}},{"name":"b","inputSchema":{"type":"object"}}],"nextCursor":"c"}`)
	if got := s.Present(list); !bytes.Equal(got, list) {
		t.Errorf("tools/list with open schemas changed:\n%s", got)
	}
}

// A small content beside a large structuredContent (a tool without an
// outputSchema): content keeps its items and gains the link, so a model
// reading content alone finds it too.
func TestOffloadStructuredOnly(t *testing.T) {
	svc := testService(t, nil)
	var rows []any
	for i := range 500 {
		rows = append(rows, map[string]any{"id": i, "name": fmt.Sprintf("row %d", i)})
	}
	in, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": "500 rows"}}, "structuredContent": map[string]any{"rows": rows, "count": 500}})
	r, _ := rewriteSmall(t, svc, Call{Method: "tools/call", Tool: "t"}, in)
	if len(r.Content) != 2 || r.Content[0]["text"] != "500 rows" {
		t.Errorf("content: %v", r.Content)
	}
	if string(r.StructuredContent["count"]) != "500" {
		t.Errorf("the scalar count is not kept: %s", r.StructuredContent["count"])
	}
}

// A tool whose outputSchema the proxy cannot compile (a remote $ref; a
// client may resolve it) gets no unchecked shrunk value: the result
// becomes a tool error, and the value a link.
func TestOffloadUnusableSchema(t *testing.T) {
	var s Schemas
	s.Present([]byte(`{"tools":[{"name":"t","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"rows":{"$ref":"https://example.invalid/rows.json"}}}}]}`))
	sch, err := s.Lookup("t")
	if sch != nil || err == nil {
		t.Fatalf("a schema with a remote $ref: %v, %v", sch, err)
	}
	var rows []any
	for i := range 500 {
		rows = append(rows, map[string]any{"id": i, "name": fmt.Sprintf("row %d", i)})
	}
	in, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": "500 rows"}}, "structuredContent": map[string]any{"rows": rows}})
	r, _ := rewriteSmall(t, testService(t, nil), Call{Method: "tools/call", Tool: "t", Schema: sch, SchemaErr: err}, in)
	if !r.IsError || r.StructuredContent != nil {
		t.Errorf("want a tool error without structuredContent: %+v", r)
	}
}

// A 1920×1080 screenshot leaves the result, and the model still sees it:
// an inline thumbnail (long side 512) a client can decode, then the
// preview and the link.
func TestOffloadScreenshotThumbnail(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 1920, 1080))
	for y := range 1080 {
		for x := range 1920 {
			img.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(buf.Bytes())}}})
	out, stored, err := New(testService(t, nil), builtInPolicy(t), Options{}).Rewrite(context.Background(), Call{Method: "tools/call", Tool: "shot"}, in)
	if err != nil || len(stored) != 1 {
		t.Fatalf("%d stored, %v", len(stored), err)
	}
	schematest.Check(t, "2025-11-25", "CallToolResult", out)
	var r callResult
	json.Unmarshal(out, &r)
	if len(r.Content) != 3 || r.Content[0]["type"] != "image" || r.Content[1]["type"] != "text" || r.Content[2]["type"] != "resource_link" {
		t.Fatalf("content: want a thumbnail, a preview and a link: %.400s", out)
	}
	data, err := base64.StdEncoding.DecodeString(r.Content[0]["data"].(string))
	if err != nil {
		t.Fatal(err)
	}
	thumb, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("the thumbnail does not decode: %v", err)
	}
	if b := thumb.Bounds(); b.Dx() != 512 || b.Dy() != 288 {
		t.Errorf("thumbnail %dx%d, want 512x288", b.Dx(), b.Dy())
	}
	if p := r.Content[1]["text"].(string); !strings.Contains(p, "1920") || !strings.Contains(p, "1080") {
		t.Errorf("the preview does not give the dimensions: %s", p)
	}
	t.Logf("result %d bytes, thumbnail %d bytes (%s), original %d bytes", len(out), len(data), r.Content[0]["mimeType"], buf.Len())
}

// A thumbnail is for the client alone: once the call's context has
// ended (its client left), none is drawn, while the screenshot is stored
// and linked all the same, and the preview says why there is none.
func TestOffloadThumbnailOnlyWhileCalled(t *testing.T) {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 1920, 1080))); err != nil {
		t.Fatal(err)
	}
	in, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "image", "mimeType": "image/png", "data": base64.StdEncoding.EncodeToString(buf.Bytes())}}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	out, stored, err := New(testService(t, nil), builtInPolicy(t), Options{}).Rewrite(ctx, Call{Method: "tools/call", Tool: "shot"}, in)
	if err != nil || len(stored) != 1 || stored[0].Size != int64(buf.Len()) {
		t.Fatalf("%v stored, %v", stored, err)
	}
	var r callResult
	json.Unmarshal(out, &r)
	if len(r.Content) != 2 || r.Content[0]["type"] != "text" || r.Content[1]["type"] != "resource_link" {
		t.Fatalf("content: want a preview and a link, no thumbnail: %.400s", out)
	}
	if p := r.Content[0]["text"].(string); !strings.Contains(p, "1920×1080 px") || !strings.Contains(p, "Not thumbnailed: its caller stopped waiting first.") {
		t.Errorf("preview: %s", p)
	}
}

// One threshold for the same content whatever its item kind: a 10 KB CSV
// as a blob stays inline like the same CSV as text (it went at 4 KiB, the
// binary threshold), and artifact names say what they hold.
func TestOffloadThresholdByContent(t *testing.T) {
	svc := testService(t, nil)
	csv := "a,b,c\n" + strings.Repeat("1,2,3\n", 1700)
	for _, item := range []map[string]any{
		{"type": "text", "text": csv},
		{"type": "resource", "resource": map[string]any{"uri": "file:///t.csv", "mimeType": "text/csv", "blob": base64.StdEncoding.EncodeToString([]byte(csv))}},
	} {
		in, _ := json.Marshal(map[string]any{"content": []any{item}})
		_, stored, err := New(svc, threshold{0}, Options{Budget: 1 << 20}).Rewrite(context.Background(), Call{Method: "tools/call", Tool: "t"}, in)
		if err != nil || len(stored) != 0 {
			t.Errorf("%s item of %d bytes: %d stored (%v), want it inline", item["type"], len(csv), len(stored), err)
		}
	}
	in, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat(csv, 2)}}})
	_, stored, _ := New(svc, threshold{0}, Options{}).Rewrite(context.Background(), Call{Method: "tools/call", Tool: "query/v2 x"}, in)
	if len(stored) != 1 || !regexp.MustCompile(`^query_v2_x-text-[a-z0-9]{6}\.csv$`).MatchString(stored[0].Name) {
		t.Errorf("artifact name: %v", stored)
	}
}

// What a careless or hostile upstream sends beside a large item: a null
// or non-object structuredContent, null content items, a null
// outputSchema, a server's own _spillway member. The large item still
// leaves, the rest passes as it came, and nothing panics.
func TestOffloadOddShapes(t *testing.T) {
	big := map[string]any{"type": "text", "text": strings.Repeat("a log line\n", 2000)}
	var s Schemas
	s.Present([]byte(`{"tools":[{"name":"n","inputSchema":{"type":"object"},"outputSchema":null},{"name":"s","inputSchema":{"type":"object"},"outputSchema":"x"}]}`))
	for _, tool := range []string{"n", "s"} {
		if sch, err := s.Lookup(tool); sch != nil || err != nil || !s.Listed(tool) {
			t.Errorf("tool %s with a non-object outputSchema: %v, %v, listed %v", tool, sch, err, s.Listed(tool))
		}
	}
	for name, sc := range map[string]any{
		"null structuredContent":   nil,
		"string structuredContent": strings.Repeat("s", 9000),
		"array structuredContent":  []any{1, 2, 3},
		"own _spillway member":     map[string]any{"_spillway": "the server's", "rows": strings.Repeat("r", 9000)},
	} {
		t.Run(name, func(t *testing.T) {
			in, _ := json.Marshal(map[string]any{"content": []any{nil, big, 7}, "structuredContent": sc})
			out, stored, err := New(testService(t, nil), builtInPolicy(t), Options{}).Rewrite(context.Background(), Call{Method: "tools/call", Tool: "n"}, in)
			if err != nil || !json.Valid(out) {
				t.Fatalf("%v: %.300s", err, out)
			}
			var r struct {
				Content           []json.RawMessage `json:"content"`
				StructuredContent json.RawMessage   `json:"structuredContent"`
			}
			json.Unmarshal(out, &r)
			if len(stored) == 0 || string(r.Content[0]) != "null" || len(r.Content) < 4 || string(r.Content[3]) != "7" {
				t.Errorf("stored %d; content %s", len(stored), r.Content)
			}
			orig, _ := json.Marshal(sc)
			switch name {
			case "own _spillway member":
				if !bytes.Contains(r.StructuredContent, []byte(`"_spillway":"the server's"`)) || bytes.Count(r.StructuredContent, []byte(`"_spillway"`)) != 1 {
					t.Errorf("the server's own _spillway member: %s", r.StructuredContent)
				}
			default: // not an object: never shrunk, passed as it came
				if !bytes.Equal(r.StructuredContent, orig) {
					t.Errorf("structuredContent changed: %.200s", r.StructuredContent)
				}
			}
		})
	}
}

// Present edits every closed schema of a listing in one pass, keeps the
// open ones and every other byte, and learns each tool.
func TestPresentManyTools(t *testing.T) {
	list := `{"tools":[` +
		`{"name":"a","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"x":{"type":"string"}},"additionalProperties":false}},` +
		`{"name":"b","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"y":{"type":"integer"}}}},` +
		`{"name":"c","inputSchema":{"type":"object"},"outputSchema":{"type":"object","unevaluatedProperties":false}} ],"nextCursor":"n"}`
	var s Schemas
	out := s.Present([]byte(list))
	var r struct {
		Tools []struct {
			Name         string          `json:"name"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal(out, &r); err != nil || len(r.Tools) != 3 || r.NextCursor != "n" {
		t.Fatalf("%v: %s", err, out)
	}
	for i, want := range []bool{true, false, true} {
		has := bytes.Contains(r.Tools[i].OutputSchema, []byte(`"`+NoteMember+`"`))
		if has != want {
			t.Errorf("%s: note property %v, want %v: %s", r.Tools[i].Name, has, want, r.Tools[i].OutputSchema)
		}
		sch, err := s.Lookup(r.Tools[i].Name)
		if err != nil || sch == nil {
			t.Fatalf("%s: %v", r.Tools[i].Name, err)
		}
		if got := sch.Validate([]byte(`{"` + NoteMember + `":"n"}`)); got != nil {
			t.Errorf("%s: the presented schema refuses the note: %v", r.Tools[i].Name, got)
		}
	}
	if !bytes.Contains(out, []byte(`{"name":"b","inputSchema":{"type":"object"},"outputSchema":{"type":"object","properties":{"y":{"type":"integer"}}}}`)) || !bytes.HasSuffix(out, []byte(` ],"nextCursor":"n"}`)) {
		t.Errorf("bytes outside the closed schemas changed: %s", out)
	}
}

// FuzzPresent: whatever an upstream lists, what clients are shown is
// valid JSON, and the listing is unchanged where no schema constrains
// the members it does not name.
func FuzzPresent(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"a","outputSchema":{"additionalProperties":false}},{"name":"b","outputSchema":null},{"name":"a"}]}`))
	f.Add([]byte(`{"tools":[{"name":"a","outputSchema":{"properties":[],"additionalProperties":false}}]}`))
	f.Add([]byte(`{"tools":{}}`))
	f.Add([]byte(`{"tools":[{"name":"z","outputSchema":{"$ref":"#/definitions/X","definitions":{"X":{"additionalProperties":false}}}}]}`))
	f.Add([]byte(`{"tools":[{"name":"p","outputSchema":{"allOf":[{"$ref":"#/$defs/M"},{"$ref":"#/$defs/M"}],"$defs":{"M":{"unevaluatedProperties":{"type":"integer"}}}}}]}`))
	f.Add([]byte(`{"tools":[{"name":"l","outputSchema":{"$ref":"#","anyOf":[{"$ref":"#/anyOf/0"},{"$ref":"#/x~1y/%7e0"}],"additionalProperties":{}}}]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		if !json.Valid(in) {
			return
		}
		var s Schemas
		out := s.Present(in)
		if !json.Valid(out) {
			t.Fatalf("invalid JSON shown: %q → %q", in, out)
		}
		var v any
		json.Unmarshal(in, &v)
		if !constrains(v) && !bytes.Equal(in, out) {
			t.Fatalf("no schema constrains members, yet %q became %q", in, out)
		}
	})
}

// constrains reports whether some object in the JSON value v has an
// additionalProperties or unevaluatedProperties member.
func constrains(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if k == "additionalProperties" || k == "unevaluatedProperties" || constrains(e) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(v, constrains)
	}
	return false
}
