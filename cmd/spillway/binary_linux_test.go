package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// binaryUpstreamEnv, set, makes TestBinaryImageUpstream the stdio MCP
// server TestBinaryTransferRSS puts behind Spillway.
const binaryUpstreamEnv = "SPILLWAY_TEST_BINARY_UPSTREAM"

// binaryImageSize is the image the binary upstream returns: 50 MB.
const binaryImageSize = 50 << 20

// binaryImage writes the binary upstream's image: a PNG signature, then
// bytes of a counter, the same every time.
func binaryImage(w io.Writer) {
	buf := make([]byte, 64<<10)
	for k := 0; k < binaryImageSize; k += len(buf) {
		for i := range buf {
			buf[i] = byte((k+i)*7 + (k+i)>>16)
		}
		if k == 0 {
			copy(buf, "\x89PNG\r\n\x1a\n")
		}
		w.Write(buf[:min(len(buf), binaryImageSize-k)])
	}
}

// TestBinaryImageUpstream is not a test: with binaryUpstreamEnv set it
// serves MCP on stdin and stdout, one tool returning a 50 MB image
// (base64 in its line, written as it is encoded), and exits when stdin
// ends.
func TestBinaryImageUpstream(t *testing.T) {
	if os.Getenv(binaryUpstreamEnv) == "" {
		t.Skip("the image upstream of TestBinaryTransferRSS")
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil {
			continue
		}
		w := bufio.NewWriterSize(os.Stdout, 1<<20)
		switch m.Method {
		case "initialize":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"img","version":"1"}}}`+"\n", m.ID, m.Params.ProtocolVersion)
		case "tools/list":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"image","inputSchema":{"type":"object"}}]}}`+"\n", m.ID)
		case "tools/call":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"image","mimeType":"image/png","data":"`, m.ID)
			enc := base64.NewEncoder(base64.StdEncoding, w)
			binaryImage(enc)
			enc.Close()
			w.WriteString("\"}]}}\n")
		default:
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`+"\n", m.ID)
		}
		w.Flush()
	}
	os.Exit(0) // nothing of the test framework's on stdout
}

// binaryPeakRSS is the most TestBinaryTransferRSS lets Spillway's resident
// memory grow while it serves a 50 MB image to a multipart client.
const binaryPeakRSS = 16 << 20

// TestBinaryTransferRSS is issue 41's binary transfer check against the
// real binary: a session-era client that declared binaryTransfer
// (multipart) calls a tool returning a 50 MB image. Spillway offloads it
// (or, with --no-offload-tools, passes it inline: its base64 waits in a
// spill file), and the client's multipart answer holds a binary item
// whose part has the original's SHA-256, beside the preview and link
// when offloaded, no base64 anywhere; Spillway's peak RSS stays within
// binaryPeakRSS of idle.
func TestBinaryTransferRSS(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	binaryImage(h)
	want := hex.EncodeToString(h.Sum(nil))
	for _, offload := range []bool{true, false} {
		t.Run(map[bool]string{true: "offloaded", false: "inline"}[offload], func(t *testing.T) {
			binaryTransferRSS(t, self, want, offload)
		})
	}
}

func binaryTransferRSS(t *testing.T, self, want string, offload bool) {
	data, addr := t.TempDir(), rsFreeAddr(t)
	args := []string{"serve", "--listen", addr, "--data", data, "--log-level", "warn",
		"--upstream-cmd", self + " -test.run=^TestBinaryImageUpstream$", "--upstream-env", binaryUpstreamEnv + "=1"}
	if !offload {
		args = append(args, "--no-offload-tools", "image")
	}
	cmd := startBinary(t, nil, args...)
	base := "http://" + addr
	rsListen(t, addr)
	tok := mcpToken(t, data)
	resp := mcpPost(t, base+"/mcp", tok, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":{"binaryTransfer":{"supported":true,"preferredMode":"multipart"}},"clientInfo":{"name":"t","version":"1"}}}`)
	init, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(init), `"binaryTransfer":{"maxBinarySize":`) {
		t.Fatalf("initialize: %s", init)
	}
	session := resp.Header.Get("Mcp-Session-Id")
	mcpPost(t, base+"/mcp", tok, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()

	pid := cmd.Process.Pid
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		if os.Getenv("CI") != "" { // the measurement is what this test is for
			t.Fatalf("cannot reset the peak RSS: %v", err)
		}
		t.Skipf("cannot reset the peak RSS: %v", err)
	}
	idle := procStatusKB(t, pid, "VmRSS")
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"image","arguments":{}}}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream, multipart/mixed")
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	req.Header.Set("Mcp-Session-Id", session)
	start := time.Now()
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msgs, parts := readMultipart(t, resp)
	peak := procStatusKB(t, pid, "VmHWM")
	t.Logf("50 MB image to a multipart client in %v: idle RSS %d MiB, peak %d MiB (+%d MiB)",
		time.Since(start).Round(time.Millisecond), idle>>20, peak>>20, (peak-idle)>>20)
	if peak-idle > binaryPeakRSS {
		t.Errorf("peak RSS %d MiB above idle, over %d MiB", (peak-idle)>>20, binaryPeakRSS>>20)
	}
	if len(msgs) != 1 || len(parts) != 1 {
		t.Fatalf("%d messages, %d binary parts: %s", len(msgs), len(parts), msgs)
	}
	m := msgs[0]
	if strings.Contains(m, `"data":`) || strings.Contains(m, `"blob":`) || strings.Contains(m, `"resource_link"`) != offload {
		t.Errorf("the message: %.500s", m)
	}
	for id, sum := range parts {
		if sum != want || !strings.Contains(m, `"streamId":"`+id+`"`) || !strings.Contains(m, `"checksum":"`+want+`"`) {
			t.Errorf("part %s has SHA-256 %s, want %s; message %.500s", id, sum, want, m)
		}
	}
}

// readMultipart reads a multipart/mixed answer: its JSON parts, and the
// SHA-256 of each binary part by its Content-ID, hashed as it streams.
func readMultipart(t *testing.T, resp *http.Response) (msgs []string, parts map[string]string) {
	t.Helper()
	defer resp.Body.Close()
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/mixed" {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 500))
		t.Fatalf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	mr := multipart.NewReader(resp.Body, params["boundary"])
	parts = map[string]string{}
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return msgs, parts
		}
		if err != nil {
			t.Fatal(err)
		}
		if id := p.Header.Get("Content-Id"); id != "" {
			h := sha256.New()
			io.Copy(h, p)
			parts[strings.Trim(id, "<>")] = hex.EncodeToString(h.Sum(nil))
			continue
		}
		b, _ := io.ReadAll(p)
		msgs = append(msgs, string(b))
	}
}
