package main

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// rsMaxMessage is issue 21's goal: the JSON-RPC message an agent receives
// for a large output is under 8 KB.
const rsMaxMessage = 8 << 10

// rsOutput is one large output a real server produces.
type rsOutput struct {
	name   string
	server string // filesystem, memory or list
	call   rsCall
	// originals are the SHA-256 sums one of the result's links must have;
	// nil: those of the result the same call gets directly.
	originals map[string]string
}

// TestRealServers puts Spillway in front of servers nobody here wrote, as
// people run them: @modelcontextprotocol/server-filesystem and
// server-memory over stdio, and a TypeScript SDK server in JSON-response
// mode over HTTP returning FastMCP's and a PDF reader's many-item shapes.
// For each large output, with the TypeScript SDK's v1 and v2 clients (their
// schema validation included): the call succeeds, the message the client
// receives is under 8 KB, every link answers, a link's bytes are the
// original's, and that link is in the text of content and in
// JSON.stringify(structuredContent). A small result is byte-identical to
// the same call made directly. Over stdio, the v1 client reads a 20 MB file
// through `spillway serve --stdio` where directly its connection closes.
func TestRealServers(t *testing.T) {
	rt := rsSetup(t)

	// The outputs, generated once.
	root := t.TempDir()
	at := func(name string) string { return filepath.Join(root, name) }
	rsLog(t, at("app.log"), 20<<20)
	rsCSV(t, at("rows.csv"), 50000)
	rsTree(t, at("node_modules"), 5, 10, 100)
	rsScreenshot(t, at("screen.png"), 1920, 1080)
	rsPhoto(t, at("photo.jpg"), 4000, 2700)
	rsWrite(t, at("small.txt"), []byte(strings.Repeat("a small file, read whole.\n", 4)))
	memFile := filepath.Join(t.TempDir(), "memory.jsonl")
	rsGraph(t, memFile, 3000)
	fileSum := func(name, what string) map[string]string {
		b, err := os.ReadFile(at(name))
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{rsSum(b): what}
	}
	read := func(tool, name string) rsCall { return rsCall{Name: tool, Arguments: map[string]any{"path": at(name)}} }
	outputs := []rsOutput{
		{"log 20 MB", "filesystem", read("read_text_file", "app.log"), fileSum("app.log", "the file")},
		{"CSV 50,000 rows", "filesystem", read("read_text_file", "rows.csv"), fileSum("rows.csv", "the file")},
		{"directory tree", "filesystem", read("directory_tree", "node_modules"), nil},
		{"screenshot 1920x1080", "filesystem", read("read_media_file", "screen.png"), fileSum("screen.png", "the file")},
		{"photo 10 MB", "filesystem", read("read_media_file", "photo.jpg"), fileSum("photo.jpg", "the file")},
		{"graph 3,000 entities", "memory", rsCall{Name: "read_graph"}, nil},
		{"list 50,000 rows", "list", rsCall{Name: "list_rows"}, nil},
		{"120 pages", "list", rsCall{Name: "read_pages"}, nil},
	}
	small := read("read_text_file", "small.txt")

	// The servers, directly and through Spillway (one instance each).
	fsCmd := []string{rt.node, rt.bin("server-filesystem"), root}
	memCmd := []string{rt.node, rt.bin("server-memory")}
	memEnv := map[string]string{"MEMORY_FILE_PATH": memFile}
	listURL := rsListServer(t, rt)
	direct := map[string][]string{
		"filesystem": rsStdio(nil, fsCmd...),
		"memory":     rsStdio(memEnv, memCmd...),
		"list":       rsHTTP(listURL, ""),
	}
	through := map[string][]string{}
	for server, extra := range map[string][]string{
		"filesystem": {"--upstream-cmd", strings.Join(fsCmd, " ")},
		"memory":     {"--upstream-cmd", strings.Join(memCmd, " "), "--upstream-env", "MEMORY_FILE_PATH=" + memFile},
		"list":       {"--upstream-url", listURL},
	} {
		base, token := rsSpillway(t, extra...)
		through[server] = rsHTTP(base+"/mcp", token)
	}

	// What the upstreams send, for the outputs that are no file.
	for _, server := range []string{"filesystem", "memory", "list"} {
		var idx []int
		var calls []rsCall
		for i, o := range outputs {
			if o.server == server && o.originals == nil {
				idx, calls = append(idx, i), append(calls, o.call)
			}
		}
		if len(calls) == 0 {
			continue
		}
		// Not a subtest: every check needs it, whatever -run selects.
		_, reps := rsClient(t, rt, "v1", direct[server], calls...)
		for j, rep := range reps {
			if rep.Error != "" {
				t.Fatalf("%s directly: %s", calls[j].Name, rep.Error)
			}
			outputs[idx[j]].originals = rsOriginals(t, rep.Result)
			t.Logf("%s directly: %d bytes on the wire", outputs[idx[j]].name, rep.WireBytes)
		}
	}

	for _, sdk := range []string{"v1", "v2"} {
		for _, server := range []string{"filesystem", "memory", "list"} {
			t.Run(sdk+"/"+server, func(t *testing.T) {
				var mine []rsOutput
				var calls []rsCall
				for _, o := range outputs {
					if o.server == server {
						mine, calls = append(mine, o), append(calls, o.call)
					}
				}
				if server == "filesystem" {
					calls = append(calls, small)
				}
				_, reps := rsClient(t, rt, sdk, through[server], calls...)
				for i, o := range mine {
					t.Run(o.name, func(t *testing.T) { rsCheckLarge(t, reps[i], o.originals) })
				}
				if server == "filesystem" {
					t.Run("small file", func(t *testing.T) {
						_, want := rsClient(t, rt, sdk, direct[server], small)
						got := reps[len(reps)-1]
						if got.Error != "" || want[0].Error != "" || !bytes.Equal(got.Result, want[0].Result) {
							t.Errorf("through Spillway %s (%s), directly %s (%s)", got.Result, got.Error, want[0].Result, want[0].Error)
						}
						// Byte-identical as sent, too: the SDK drops what its schema does not name.
						if g, w := got.wireResult(), want[0].wireResult(); len(w) == 0 || !bytes.Equal(g, w) {
							t.Errorf("the result as sent through Spillway:\n%s\ndirectly:\n%s", g, w)
						}
					})
				}
			})
		}
	}

	// Over stdio, the face desktop hosts use: the SDK's stdio client closes
	// the connection on a message over its 10 MiB buffer.
	logCall := read("read_text_file", "app.log")
	spillwayStdio := func(t *testing.T, extra ...string) []string {
		args := []string{spillwayBin(t), "serve", "--stdio", "--data", t.TempDir(), "--listen", "127.0.0.1:0",
			"--log-level", "warn", "--upstream-cmd", strings.Join(fsCmd, " ")}
		return rsStdio(nil, append(args, extra...)...)
	}
	t.Run("stdio/v1/through", func(t *testing.T) {
		_, reps := rsClient(t, rt, "v1", spillwayStdio(t), logCall)
		rsCheckLarge(t, reps[0], outputs[0].originals)
	})
	t.Run("stdio/v1/direct", func(t *testing.T) {
		_, reps := rsClient(t, rt, "v1", direct["filesystem"], logCall)
		t.Logf("directly: %q after %d bytes", reps[0].Error, reps[0].WireBytes)
		if !strings.Contains(reps[0].Error, "Connection closed") {
			t.Errorf("directly, the 20 MB read answered %q (%d bytes), want the connection closed", reps[0].Error, reps[0].WireBytes)
		}
	})
	// Told to keep the output inline, Spillway answers with a JSON-RPC error
	// instead of a message the client cannot take, and the connection lives.
	t.Run("stdio/v1/max-message", func(t *testing.T) {
		_, reps := rsClient(t, rt, "v1", spillwayStdio(t, "--offload=false"), logCall, small)
		if !strings.Contains(reps[0].Error, "stdio-max-message") || reps[1].Error != "" {
			t.Errorf("with --offload=false, the 20 MB read answered %q (%d bytes) and then a small one %q; want a JSON-RPC error naming --stdio-max-message, then the small read",
				reps[0].Error, reps[0].WireBytes, reps[1].Error)
		}
	})
}

// rsCheckLarge checks a large output as the client received it through
// Spillway, against the SHA-256 sums of its originals.
func rsCheckLarge(t *testing.T, rep rsReport, originals map[string]string) {
	t.Helper()
	t.Logf("the client received %d bytes", rep.WireBytes)
	if rep.Error != "" {
		t.Fatalf("the call failed: %s", rep.Error)
	}
	var res rsResult
	if err := json.Unmarshal(rep.Result, &res); err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Errorf("a tool error: %.500s", rep.Result)
	}
	// An offloaded image keeps an inline thumbnail (the previews issue):
	// the goal is 8 KB plus it, and it is a few tens of KB.
	thumbs := 0
	for _, it := range res.Content {
		if it.Type == "image" {
			if len(it.Data) > 96<<10 {
				t.Errorf("an inline image of %d base64 bytes is no thumbnail", len(it.Data))
			}
			thumbs += len(it.Data)
		}
	}
	if rep.WireBytes < 0 || rep.WireBytes-thumbs >= rsMaxMessage {
		t.Errorf("the response was %d bytes (%d of them thumbnails), want under %d besides the thumbnails", rep.WireBytes, thumbs, rsMaxMessage)
	}
	// Every link, with the SHA-256 Spillway declared for it ("" if none).
	// The SDKs drop members the spec does not define from a resource_link
	// (httpUrl among them) and keep its _meta: a client finds the link
	// there, or in _meta["dev.spillway/replaced"] of the result.
	links := map[string]string{}
	for _, r := range res.Meta.Replaced {
		if r.HTTPURL == "" {
			t.Errorf("a replaced entry without httpUrl: %+v", r)
			continue
		}
		links[r.HTTPURL] = r.SHA256
	}
	for _, it := range res.Content {
		if it.Type != "resource_link" || !strings.HasPrefix(it.URI, "spillway:") {
			continue
		}
		url, sum := it.HTTPURL, it.Meta.Link.SHA256
		if url == "" {
			url = it.Meta.Link.HTTPURL
		}
		// What the typed SDKs keep: the link and its expiry in _meta.
		if exp, err := time.Parse(time.RFC3339, it.Meta.Link.HTTPURLExpiresAt); err != nil || !exp.After(time.Now()) || it.Meta.Link.HTTPURL == "" {
			t.Errorf("resource_link %s: _meta[dev.spillway/link] has no usable httpUrl and expiry: %+v", it.URI, it.Meta.Link)
		}
		if url == "" {
			t.Errorf("resource_link %s: no httpUrl reached the client, neither its own nor in _meta[dev.spillway/link]", it.URI)
			continue
		}
		if links[url] == "" {
			links[url] = sum
		}
	}
	if len(links) == 0 {
		t.Fatalf("no link in the result (%d bytes)", len(rep.Result))
	}
	var exact []string
	for _, url := range slices.Sorted(maps.Keys(links)) {
		sum := rsGet(t, url)
		if sum != "" && links[url] != "" && sum != links[url] {
			t.Errorf("link %s: bytes with SHA-256 %s, _meta says %s", url, sum, links[url])
		}
		if what, ok := originals[sum]; ok {
			t.Logf("link %s holds %s", url, what)
			exact = append(exact, url)
		}
	}
	if len(exact) == 0 {
		t.Fatalf("none of the %d links holds the original's bytes", len(links))
	}
	for _, url := range exact {
		inText := slices.ContainsFunc(res.Content, func(it rsItem) bool { return it.Type == "text" && strings.Contains(it.Text, url) })
		inStructured := len(res.Structured) == 0 || string(res.Structured) == "null" || bytes.Contains(res.Structured, []byte(url))
		if inText && inStructured {
			return
		}
	}
	t.Errorf("no exact link %q is both in a text item of content and in structuredContent (%d bytes)", exact, len(res.Structured))
}
