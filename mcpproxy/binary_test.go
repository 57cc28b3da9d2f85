package mcpproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/examples/bigtool"
	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/binframe"
	"github.com/spillway-dev/spillway/policy"
)

// binaryCaps declares binary transfer, multipart preferred.
var binaryCaps = map[string]any{"binaryTransfer": map[string]any{"supported": true, "preferredMode": "multipart"}}

// binaryProxy is a proxy in front of the spillimage child (an image of n
// bytes per call), offloading (svc set) or not.
func binaryProxy(t *testing.T, n int, offload bool) (string, *artifact.Service) {
	t.Helper()
	o := mcpproxy.Options{Upstream: &mcpproxy.CommandUpstream{Command: os.Args[0],
		Args: []string{"-test.run=^TestSpillChild$", "--", "spillimage", strconv.Itoa(n)}}, SpillDir: t.TempDir()}
	var svc *artifact.Service
	if offload {
		svc = newService(t)
		eng, err := policy.New(context.Background(), policy.Options{})
		if err != nil {
			t.Fatal(err)
		}
		o.Artifacts, o.Offloader = svc, mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{})
	}
	p, err := mcpproxy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return serve(t, p), svc
}

// binaryPost is a 2026-07-28 request declaring caps, accepting
// multipart/mixed too.
func binaryPost(t *testing.T, url string, id any, method string, params map[string]any, caps map[string]any) *http.Response {
	t.Helper()
	params["_meta"] = map[string]any{"io.modelcontextprotocol/clientCapabilities": caps}
	req := statelessRequest(context.Background(), url, id, method, params)
	req.Header.Set("Accept", "application/json, text/event-stream, multipart/mixed")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// mpart is one part of a multipart answer.
type mpart struct {
	json  map[string]any // a JSON part
	event string         // its Mcp-Event-Id
	id    binframe.StreamID
	mime  string
	sum   string // a binary part's SHA-256
	size  int64
}

// readParts reads a multipart answer, hashing binary parts as they come.
func readParts(t *testing.T, resp *http.Response) []mpart {
	t.Helper()
	defer resp.Body.Close()
	mr, err := binframe.NewReader(resp.Body, resp.Header.Get("Content-Type"))
	if err != nil {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%v: %.300s", err, b)
	}
	var out []mpart
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if id, ok := binframe.ContentID(p.Header); ok {
			h := sha256.New()
			n, err := io.Copy(h, p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, mpart{id: id, mime: p.Header.Get("Content-Type"), sum: hex.EncodeToString(h.Sum(nil)), size: n})
			continue
		}
		var m map[string]any
		if err := json.NewDecoder(p).Decode(&m); err != nil {
			t.Fatal(err)
		}
		out = append(out, mpart{json: m, event: p.Header.Get(binframe.HeaderEventID)})
	}
}

// binaryItems checks that every binaryRef of a JSON part is followed by
// its bytes (the size and checksum it states) and that no JSON part holds
// base64 (a data or blob member); it returns the refs' checksums in order.
func binaryItems(t *testing.T, parts []mpart) (sums []string) {
	t.Helper()
	var want []map[string]any
	for _, p := range parts {
		if p.json == nil {
			if len(want) == 0 {
				t.Fatalf("a binary part nobody announced")
			}
			ref := want[0]
			want = want[1:]
			if ref["streamId"] != p.id.String() || ref["checksum"] != p.sum || ref["size"] != float64(p.size) {
				t.Errorf("part %s (%d bytes, %s) for ref %v", p.id, p.size, p.sum, ref)
			}
			continue
		}
		b, _ := json.Marshal(p.json)
		if bytes.Contains(b, []byte(`"data":`)) || bytes.Contains(b, []byte(`"blob":`)) {
			t.Errorf("base64 in a JSON part: %.300s", b)
		}
		walk(p.json, func(m map[string]any) {
			if ref, ok := m["binaryRef"].(map[string]any); ok {
				if m["transferMode"] != "binary" {
					t.Errorf("a binaryRef without transferMode binary: %v", m)
				}
				want = append(want, ref)
				sums = append(sums, ref["checksum"].(string))
			}
		})
	}
	if len(want) > 0 {
		t.Errorf("%d binaryRefs with no part", len(want))
	}
	return sums
}

// walk calls f with every object in v.
func walk(v any, f func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		f(v)
		for _, x := range v {
			walk(x, f)
		}
	case []any:
		for _, x := range v {
			walk(x, f)
		}
	}
}

// imageSum is the SHA-256 of the spillimage child's image of n bytes.
func imageSum(n int) string {
	h := sha256.New()
	imageBytes(h, n)
	return hex.EncodeToString(h.Sum(nil))
}

// A multipart client gets an image the offloader stored as its original
// bytes from the store, beside the preview and the link; resources/read
// with transferMode binary gives the same bytes; the binaryRef's stream id
// resolves through resources/stream for its tenant; a client that
// declared nothing, or that does not accept multipart, is answered as
// before.
func TestBinaryMultipartOffloaded(t *testing.T) {
	const n = 3 << 20
	url, _ := binaryProxy(t, n, true)
	call := map[string]any{"name": "export", "arguments": map[string]any{}}
	resp := binaryPost(t, url, 1, "tools/call", call, binaryCaps)
	parts := readParts(t, resp)
	sums := binaryItems(t, parts)
	if len(sums) != 1 || sums[0] != imageSum(n) {
		t.Fatalf("binary items %v, want the image's %s", sums, imageSum(n))
	}
	result := parts[0].json["result"].(map[string]any)
	var types []string
	var link, img map[string]any
	for _, c := range result["content"].([]any) {
		c := c.(map[string]any)
		types = append(types, c["type"].(string))
		switch c["type"] {
		case "resource_link":
			link = c
		case "image":
			img = c
		}
	}
	if strings.Join(types, " ") != "text resource_link image" || img["mimeType"] != "image/png" {
		t.Fatalf("content %v: %v", types, img)
	}
	lm := img["_meta"].(map[string]any)[artifact.MetaLink].(map[string]any)
	if lm["httpUrl"] == "" || lm["sha256"] != sums[0] {
		t.Errorf("the binary item's link: %v", lm)
	}
	ref := img["binaryRef"].(map[string]any)

	// resources/read, binary.
	parts = readParts(t, binaryPost(t, url, 2, "resources/read", map[string]any{"uri": link["uri"], "transferMode": "binary"}, binaryCaps))
	if s := binaryItems(t, parts); len(s) != 1 || s[0] != sums[0] {
		t.Errorf("resources/read binary: %v", s)
	}

	// resources/stream by stream id (with resourceStreaming declared).
	streaming := map[string]any{"binaryTransfer": map[string]any{"supported": true}, "resourceStreaming": map[string]any{}}
	// The proxy has no fetch endpoint of its own here: the answer is the
	// artifact's download URL.
	resp = binaryPost(t, url, 3, "resources/stream", map[string]any{"streamId": ref["streamId"]}, streaming)
	var dl struct {
		Result struct {
			URI         string `json:"uri"`
			DownloadURL string `json:"downloadUrl"`
		} `json:"result"`
	}
	json.NewDecoder(resp.Body).Decode(&dl)
	resp.Body.Close()
	if dl.Result.URI != link["uri"] || dl.Result.DownloadURL == "" {
		t.Fatalf("resources/stream by stream id: %+v", dl)
	}
	resp = mustDo(t, mustGet(dl.Result.DownloadURL))
	h := sha256.New()
	io.Copy(h, resp.Body)
	resp.Body.Close()
	if hex.EncodeToString(h.Sum(nil)) != sums[0] {
		t.Errorf("resources/stream by stream id: %d, not the image", resp.StatusCode)
	}
	resp = binaryPost(t, url, 4, "resources/stream", map[string]any{"streamId": binframe.NewStreamID().String()}, streaming)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(b, []byte(`-32002`)) {
		t.Errorf("an unknown stream id: %s", b)
	}

	// A client that declared nothing, or does not accept multipart: JSON
	// or an event stream, the image a link as before.
	for name, r := range map[string]*http.Response{
		"declared nothing": binaryPost(t, url, 5, "tools/call", call, map[string]any{}),
		"no multipart":     mustDo(t, statelessRequest(context.Background(), url, 6, "tools/call", map[string]any{"name": "export", "arguments": map[string]any{}, "_meta": map[string]any{"io.modelcontextprotocol/clientCapabilities": binaryCaps}})),
	} {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") || bytes.Contains(b, []byte("binaryRef")) || !bytes.Contains(b, []byte("resource_link")) {
			t.Errorf("%s: %s %.300s", name, r.Header.Get("Content-Type"), b)
		}
	}
}

func mustGet(url string) *http.Request {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	return req
}

func mustDo(t *testing.T, req *http.Request) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Without an offloader, an image passes inline: a multipart client gets
// its bytes from the spill file as a part (a large one) or from the
// message (a small one); a client that declared nothing gets the very
// bytes it got before, with multipart/mixed in its Accept or not.
func TestBinaryMultipartInline(t *testing.T) {
	for _, n := range []int{3000, 3 << 20} {
		url, _ := binaryProxy(t, n, false)
		call := func() map[string]any { return map[string]any{"name": "export", "arguments": map[string]any{}} }
		sums := binaryItems(t, readParts(t, binaryPost(t, url, 1, "tools/call", call(), binaryCaps)))
		if len(sums) != 1 || sums[0] != imageSum(n) {
			t.Errorf("%d bytes: binary items %v, want %s", n, sums, imageSum(n))
		}
		plain := mustDo(t, statelessRequest(context.Background(), url, 2, "tools/call", call()))
		before, _ := io.ReadAll(plain.Body)
		plain.Body.Close()
		after, _ := io.ReadAll(binaryPost(t, url, 2, "tools/call", call(), map[string]any{}).Body)
		if !bytes.Equal(before, after) || len(before) < n {
			t.Errorf("%d bytes: a client that declared nothing got %d bytes, %d before", n, len(after), len(before))
		}
	}
}

// A stream-mode stdio client gets the line, then one frame per binaryRef:
// the original image's bytes, from the store; a client that declared
// nothing gets the same line as before.
func TestBinaryStdioFrames(t *testing.T) {
	const n = 3 << 20
	svc := newService(t)
	eng, err := policy.New(context.Background(), policy.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.CommandUpstream{Command: os.Args[0],
		Args: []string{"-test.run=^TestSpillChild$", "--", "spillimage", strconv.Itoa(n)}}, SpillDir: t.TempDir(),
		Artifacts: svc, Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{})})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, caps := range []string{`{"binaryTransfer":{"supported":true,"preferredMode":"stream"}}`, `{}`} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() { done <- p.ServeStdio(ctx, inR, outW); outW.Close() }()
		out := bufio.NewReader(outR)
		io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"t","version":"1"}}}`+"\n")
		line, _ := out.ReadBytes('\n')
		declared := bytes.Contains(line, []byte(`"binaryTransfer":{"maxBinarySize":`))
		if declared != (caps != `{}`) {
			t.Errorf("caps %s: initialize result %s", caps, line)
		}
		io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"export","arguments":{}}}`+"\n")
		line, _ = out.ReadBytes('\n')
		var m struct {
			Result struct {
				Content []map[string]any `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%v: %.300s", err, line)
		}
		var refs []map[string]any
		for _, c := range m.Result.Content {
			if r, ok := c["binaryRef"].(map[string]any); ok {
				refs = append(refs, r)
			}
		}
		if caps == `{}` {
			if len(refs) != 0 || bytes.Contains(line, []byte("transferMode")) {
				t.Errorf("a client that declared nothing got %s", line)
			}
		} else {
			if len(refs) != 1 {
				t.Fatalf("refs %v in %s", refs, line)
			}
			id, size, err := binframe.ReadFrameHeader(out, 1<<30)
			if err != nil || id.String() != refs[0]["streamId"] || size != n {
				t.Fatalf("frame %v %d %v for %v", id, size, err, refs[0])
			}
			h := sha256.New()
			io.CopyN(h, out, size)
			if got := hex.EncodeToString(h.Sum(nil)); got != imageSum(n) || got != refs[0]["checksum"] {
				t.Errorf("frame bytes %s, want %s", got, imageSum(n))
			}
			// The next line follows the frame: resources/read, binary, of
			// the artifact the link names gives the same bytes in a frame.
			var uri string
			for _, c := range m.Result.Content {
				if c["type"] == "resource_link" {
					uri, _ = c["uri"].(string)
				}
			}
			io.WriteString(inW, `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"`+uri+`","transferMode":"binary"}}`+"\n")
			l, _ := out.ReadBytes('\n')
			var rr struct {
				Result struct {
					Contents []struct {
						BinaryRef map[string]any `json:"binaryRef"`
					} `json:"contents"`
				} `json:"result"`
			}
			json.Unmarshal(l, &rr)
			if len(rr.Result.Contents) != 1 || rr.Result.Contents[0].BinaryRef["checksum"] != imageSum(n) {
				t.Fatalf("resources/read binary: %.300s", l)
			}
			id, size, err = binframe.ReadFrameHeader(out, 1<<30)
			h = sha256.New()
			io.CopyN(h, out, size)
			if err != nil || id.String() != rr.Result.Contents[0].BinaryRef["streamId"] || hex.EncodeToString(h.Sum(nil)) != imageSum(n) {
				t.Errorf("resources/read frame %v %d %v", id, size, err)
			}
			io.WriteString(inW, `{"jsonrpc":"2.0","id":4,"method":"ping"}`+"\n")
			if l, _ := out.ReadBytes('\n'); !bytes.Contains(l, []byte(`"id":4`)) {
				t.Errorf("after the frames: %q", l)
			}
		}
		inW.Close()
		<-done
		cancel()
	}
}

// binarySessionPost posts body in session s (none: "") of the 2025-11-25
// revision, accepting multipart/mixed.
func binarySessionPost(t *testing.T, url, s, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream, multipart/mixed")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	if s != "" {
		req.Header.Set("Mcp-Session-Id", s)
	}
	return mustDo(t, req)
}

// Through the relay (a Streamable HTTP upstream, bigtool), in the session
// era: a client that declared binaryTransfer in initialize gets the
// chart's thumbnail and original as binary parts after the message, the
// original the very PNG bigtool draws; its event stream's id rides on
// the message part; an embedded resource's blob becomes binary too.
func TestBinaryRelaySession(t *testing.T) {
	h, err := bigtool.NewHandler(bigtool.NewServer(nil), bigtool.EraSession)
	if err != nil {
		t.Fatal(err)
	}
	_, url := offloadingSpillway(t, serve(t, h))
	resp := binarySessionPost(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":{"binaryTransfer":{"supported":true}},"clientInfo":{"name":"t","version":"1"}}}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	s := resp.Header.Get("Mcp-Session-Id")
	binarySessionPost(t, url, s, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()

	parts := readParts(t, binarySessionPost(t, url, s, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"chart","arguments":{}}}`))
	sums := binaryItems(t, parts)
	var png bytes.Buffer
	bigtool.Chart(&png, bigtool.ChartOptions{})
	want := sha256.Sum256(png.Bytes())
	if len(sums) != 2 || sums[1] != hex.EncodeToString(want[:]) {
		t.Fatalf("binary items %v, want a thumbnail and %x", sums, want)
	}
	if parts[0].json["result"] == nil || parts[0].event == "" {
		t.Fatalf("first part (event id %q) %v", parts[0].event, parts[0].json)
	}

	parts = readParts(t, binarySessionPost(t, url, s, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"export_csv","arguments":{"as":"blob","rows":100}}}`))
	if sums := binaryItems(t, parts); len(sums) != 1 {
		t.Errorf("export_csv as a blob: %d binary items", len(sums))
	}
}

// A client that declared both resumable streams and binary transfer gets
// its stream as parts: notifications/stream/create, the response with
// its binaryRef (its event id kept) followed by the bytes, then
// notifications/stream/end.
func TestBinaryWithStreams(t *testing.T) {
	const n = 3 << 20
	url, _ := binaryProxy(t, n, true)
	caps := map[string]any{"streams": map[string]any{}, "binaryTransfer": map[string]any{"supported": true}}
	parts := readParts(t, binaryPost(t, url, 1, "tools/call", map[string]any{"name": "export", "arguments": map[string]any{}}, caps))
	var kinds []string
	for _, p := range parts {
		switch {
		case p.json == nil:
			kinds = append(kinds, "bytes")
		case p.json["method"] != nil:
			kinds = append(kinds, p.json["method"].(string))
		default:
			kinds = append(kinds, "response#"+p.event)
		}
	}
	if got := strings.Join(kinds, " "); got != "notifications/stream/create response#1 bytes notifications/stream/end" {
		t.Errorf("parts: %s", got)
	}
	if sums := binaryItems(t, parts); len(sums) != 1 || sums[0] != imageSum(n) {
		t.Errorf("binary items %v", sums)
	}
}

// A binary client's request the face refuses with an error status (a
// header that contradicts the body: 400) is answered as the face wrote
// it, not as multipart.
func TestBinaryErrorStatusPasses(t *testing.T) {
	url, _ := binaryProxy(t, 3000, false)
	params := map[string]any{"name": "export", "arguments": map[string]any{}, "_meta": map[string]any{"io.modelcontextprotocol/clientCapabilities": binaryCaps}}
	req := statelessRequest(context.Background(), url, 1, "tools/call", params)
	req.Header.Set("Accept", "application/json, text/event-stream, multipart/mixed")
	req.Header.Set("Mcp-Name", "another")
	resp := mustDo(t, req)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" || !bytes.Contains(b, []byte(`"error"`)) {
		t.Errorf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}
