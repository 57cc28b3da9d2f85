package mcpproxy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
	"github.com/spillway-dev/spillway/mcpproxy"
)

// streamClient posts resources/stream in a session that declared caps.
func streamPost(t *testing.T, url, session string, uri string) *http.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 77, "method": "resources/stream", "params": map[string]any{"uri": uri}})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream, */*")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestResourcesStream(t *testing.T) {
	upstream, _, _ := bigServer(t)
	fs, err := fsstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stores := map[string]artifact.Store{"fs": fs}
	stores["minio"] = miniotest.Start(t).Store(t)
	data := make([]byte, 200<<20)
	rand.Read(data)
	want := sha256.Sum256(data)

	for storeName, store := range stores {
		svc, fetch := serviceOn(t, store)
		a, _, err := svc.Publish(context.Background(), artifact.Artifact{MimeType: "application/octet-stream", Name: "big.bin"},
			bytes.NewReader(data), artifact.LinkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uri := artifact.URI(a.ID)
		for _, mode := range []string{mcpproxy.StreamDirect, mcpproxy.StreamRedirect, mcpproxy.StreamDownload} {
			if mode == mcpproxy.StreamRedirect && storeName == "fs" {
				continue // no presigned URLs: redirect falls back to direct
			}
			t.Run(storeName+"/"+mode, func(t *testing.T) {
				p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.HTTPUpstream{URL: upstream}, Artifacts: svc, Fetch: fetch, StreamMode: mode})
				if err != nil {
					t.Fatal(err)
				}
				defer p.Close()
				url := serve(t, p)

				open := func(caps map[string]any) string {
					a := &agent{url: url}
					init := a.call(t, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": caps,
						"clientInfo": map[string]any{"name": "s", "version": "1"}})
					if !bytes.Contains(init, []byte(`"stream":true`)) {
						t.Errorf("initialize does not declare resources.stream: %s", init)
					}
					return a.session
				}
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				resp := streamPost(t, url, open(map[string]any{"resourceStreaming": map[string]any{}}), uri)
				if mode == mcpproxy.StreamDownload {
					var r struct {
						Result struct {
							DownloadURL string `json:"downloadUrl"`
							Size        int64  `json:"size"`
						} `json:"result"`
					}
					json.NewDecoder(resp.Body).Decode(&r)
					resp.Body.Close()
					if r.Result.Size != int64(len(data)) || r.Result.DownloadURL == "" {
						t.Fatalf("download mode: %+v", r)
					}
					if resp, err = http.Get(r.Result.DownloadURL); err != nil {
						t.Fatal(err)
					}
				} else if resp.Header.Get("MCP-Resource-Uri") != uri && resp.Request.URL.Path == "/mcp" {
					t.Errorf("MCP-Resource-Uri %q", resp.Header.Get("MCP-Resource-Uri"))
				}
				h := sha256.New()
				n, err := io.Copy(h, resp.Body)
				resp.Body.Close()
				runtime.ReadMemStats(&after)
				if err != nil || n != int64(len(data)) || !bytes.Equal(h.Sum(nil), want[:]) {
					t.Fatalf("%s: %s, %d bytes, %v; want %d identical bytes", mode, resp.Status, n, err, len(data))
				}
				if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
					t.Errorf("Content-Type %q", ct)
				}
				if grew := after.TotalAlloc - before.TotalAlloc; grew > 32<<20 {
					t.Errorf("streaming 200 MiB allocated %d MiB: memory is not flat", grew>>20)
				}

				// Without the capability: a JSON-RPC error, no bytes.
				resp = streamPost(t, url, open(map[string]any{}), uri)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || !bytes.Contains(b, []byte(`"error"`)) {
					t.Errorf("no resourceStreaming: %s %.200s", resp.Header.Get("Content-Type"), b)
				}
				// maxStreamSize below the size: -32004 before any byte.
				resp = streamPost(t, url, open(map[string]any{"resourceStreaming": map[string]any{"maxStreamSize": 1 << 20}}), uri)
				b, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				if !bytes.Contains(b, []byte(`-32004`)) || len(b) > 1024 {
					t.Errorf("maxStreamSize: %.200s", b)
				}
				// An upstream resource the upstream cannot stream: -32003.
				resp = streamPost(t, url, open(map[string]any{"resourceStreaming": map[string]any{}}), "file:///etc/hosts")
				b, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				if !bytes.Contains(b, []byte(`-32003`)) {
					t.Errorf("upstream resource: %.200s", b)
				}
			})
		}
	}
}
