package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact/preview/previewtest"
)

// imageUpstreamEnv, set, makes TestImageUpstream the stdio MCP server that
// TestHostileImagesRSS puts behind Spillway.
const imageUpstreamEnv = "SPILLWAY_TEST_IMAGE_UPSTREAM"

// hostileImages are what the image upstream's tool "image" returns, by
// its argument "kind".
var hostileImages = map[string]func() []byte{
	// Issue 38's: 127 KiB of progressive JPEG that image/jpeg decodes in
	// 317 MiB (5400×4100 px of 4:4:4, every DCT coefficient kept).
	"issue38": func() []byte { return previewtest.ProgressiveJPEG(5400, 4100, 0x11, 0x11, 0x11) },
	// Just under the bound on one decode: 24 KiB that take 61 MiB to
	// draw (3840×2160 px of progressive 4:2:0).
	"atbound": func() []byte { return previewtest.ProgressiveJPEG(3840, 2160, 0x22, 0x11, 0x11) },
	// Large but ordinary: a 1920×1080 screenshot and a photo, each
	// carrying 30 MiB of metadata before its pixels (under the 32 MiB
	// kept to thumbnail); cheap to decode, both are drawn.
	"paddedpng":  func() []byte { return previewtest.Padded(screenImage(png.Encode), 30<<20) },
	"paddedjpeg": func() []byte { return previewtest.Padded(screenImage(encodeJPEG), 30<<20) },
}

// screenImage encodes a 1920×1080 picture of a few shapes with enc.
func screenImage(enc func(io.Writer, image.Image) error) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 1920, 1080))
	for y := range 1080 {
		for x := range 1920 {
			img.SetRGBA(x, y, color.RGBA{uint8(x / 8), uint8(y / 8), uint8(x*y/4096) &^ 0x0f, 255})
		}
	}
	var b bytes.Buffer
	if err := enc(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}

func encodeJPEG(w io.Writer, img image.Image) error { return jpeg.Encode(w, img, nil) }

// TestImageUpstream is not a test: with imageUpstreamEnv set it serves
// MCP on stdin and stdout, one tool returning a hostile image, and exits
// when stdin ends.
func TestImageUpstream(t *testing.T) {
	if os.Getenv(imageUpstreamEnv) == "" {
		t.Skip("the image upstream of TestHostileImagesRSS")
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Arguments       struct {
					Kind string `json:"kind"`
				} `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil {
			continue // notifications
		}
		var result any = map[string]any{}
		switch m.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": m.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "images", "version": "1"}}
		case "tools/list":
			result = map[string]any{"tools": []any{map[string]any{"name": "image", "inputSchema": map[string]any{"type": "object"}}}}
		case "tools/call":
			// Written as it is: a 40 MiB string is not worth copying
			// through an encoder in each of 16 upstreams at once.
			img := hostileImages[m.Params.Arguments.Kind]()
			mime := "image/jpeg"
			if bytes.HasPrefix(img, []byte("\x89PNG")) {
				mime = "image/png"
			}
			w := bufio.NewWriterSize(os.Stdout, 1<<20)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"image","mimeType":%q,"data":"`, m.ID, mime)
			enc := base64.NewEncoder(base64.StdEncoding, w)
			enc.Write(img)
			enc.Close()
			w.WriteString("\"}]}}\n")
			w.Flush()
			continue
		}
		out.Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
	}
	os.Exit(0) // nothing of the test framework's on stdout
}

// procStatusKB reads a field of /proc/PID/status (VmRSS, VmHWM) in bytes.
func procStatusKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// rpcAnswer is the JSON-RPC message with id in an MCP POST's body, JSON or
// SSE.
func rpcAnswer(body []byte, id int) []byte {
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		return body
	}
	for _, l := range bytes.Split(body, []byte("\n")) {
		if d, ok := bytes.CutPrefix(l, []byte("data: ")); ok && bytes.Contains(d, []byte(`"id":`+strconv.Itoa(id))) {
			return d
		}
	}
	return nil
}

// hostileImagesPeakRSS is the most that TestHostileImagesRSS lets
// Spillway's resident memory grow above idle (VmHWM − VmRSS before the
// calls): drawing holds 64 MiB of decoded images at most, and a garbage
// collector lets the heap grow to about twice what is live; the encoded
// images wait on disk.
const hostileImagesPeakRSS = 192 << 20

// TestHostileImagesRSS is issue 38's item 3 against the real binary: an
// upstream returns small progressive JPEGs that declare many pixels, or
// images of ordinary dimensions made large by their metadata, to
// concurrent calls of separate sessions. Spillway's peak RSS stays within
// hostileImagesPeakRSS of idle; every client gets its preview and link,
// with a thumbnail where the image is under the bound on one decode.
func TestHostileImagesRSS(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind   string
		calls  int
		thumb  bool
		format string
	}{
		{"issue38", 4, false, "JPEG"}, // as the four (16 took 5 GB before)
		{"atbound", 16, true, "JPEG"},
		// 16 images of 30 MiB took 1,061 MiB (PNG) and 703 MiB (JPEG)
		// above idle while their bytes were kept in memory to be drawn.
		{"paddedpng", 16, true, "PNG"},
		{"paddedjpeg", 16, true, "JPEG"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			data, addr := t.TempDir(), rsFreeAddr(t)
			cmd := startBinary(t, nil, "serve", "--listen", addr, "--data", data, "--log-level", "warn",
				"--upstream-cmd", self+" -test.run=^TestImageUpstream$", "--upstream-env", imageUpstreamEnv+"=1")
			base := "http://" + addr
			rsListen(t, addr)
			tok := mcpToken(t, data)
			// Every session opened (its upstream started) before idle is read.
			sessions := make([]string, tc.calls)
			for i := range sessions {
				resp := mcpPost(t, base+"/mcp", tok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				sessions[i] = resp.Header.Get("Mcp-Session-Id")
				resp = mcpPost(t, base+"/mcp", tok, sessions[i], `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
				resp.Body.Close()
			}
			pid := cmd.Process.Pid
			idle := procStatusKB(t, pid, "VmRSS")
			answers := make([][]byte, tc.calls)
			var wg sync.WaitGroup
			for i, s := range sessions {
				wg.Go(func() {
					req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"image","arguments":{"kind":"`+tc.kind+`"}}}`))
					req.Header.Set("Authorization", "Bearer "+tok)
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
					req.Header.Set("Mcp-Session-Id", s)
					resp, err := (&http.Client{Timeout: 3 * time.Minute}).Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					answers[i] = rpcAnswer(b, 2)
				})
			}
			wg.Wait()
			peak := procStatusKB(t, pid, "VmHWM")
			t.Logf("%d calls of %s: idle RSS %d MiB, peak %d MiB (+%d MiB)", tc.calls, tc.kind, idle>>20, peak>>20, (peak-idle)>>20)
			if peak-idle > hostileImagesPeakRSS {
				t.Errorf("peak RSS %d MiB above idle, over %d MiB", (peak-idle)>>20, hostileImagesPeakRSS>>20)
			}
			for i, a := range answers {
				var r struct {
					Result struct {
						Content []map[string]any `json:"content"`
					} `json:"result"`
				}
				json.Unmarshal(a, &r)
				var types []string
				text := ""
				for _, c := range r.Result.Content {
					types = append(types, fmt.Sprint(c["type"]))
					if c["type"] == "text" {
						text, _ = c["text"].(string)
					}
				}
				want := "[text resource_link]"
				if tc.thumb {
					want = "[image text resource_link]"
				}
				if fmt.Sprint(types) != want || !strings.Contains(text, tc.format+" image") {
					t.Errorf("call %d: content %v, want %s: %.600s", i, types, want, a)
				} else if i == 0 {
					t.Logf("the preview: %q", text)
				}
			}
		})
	}
}
