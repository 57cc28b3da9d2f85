package mcpproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy"
)

// imageBytes writes n bytes of a made-up PNG (its signature, then a
// counter's bytes), the same every time.
func imageBytes(w io.Writer, n int) {
	buf := make([]byte, 64<<10)
	copy(buf, "\x89PNG\r\n\x1a\n")
	for k, i := 0, 8; k < n; k += len(buf) {
		for ; i < len(buf); i++ {
			buf[i] = byte(k + i*7)
		}
		i = 0
		w.Write(buf[:min(len(buf), n-k)])
	}
}

// writeBigImage writes the result line of one image item of n bytes
// (base64 in the line), id last, never holding it.
func writeBigImage(w io.Writer, id string, n int) error {
	bw := bufio.NewWriterSize(w, 256<<10)
	bw.WriteString(`{"result":{"content":[{"type":"image","mimeType":"image/png","data":"`)
	enc := base64.NewEncoder(base64.StdEncoding, bw)
	imageBytes(enc, n)
	enc.Close()
	bw.WriteString(`"}]},"jsonrpc":"2.0","id":` + id + `}`)
	return bw.Flush()
}

// TestBigOffloadStdio: a stdio upstream answers with one 200 MB text item
// or one 200 MB image (base64 in its line), id last, and Spillway offloads
// it over HTTP: the agent gets a small result, the artifact holds the text
// or the decoded image exactly, and Spillway's peak RSS stays within 64 MB
// of idle (the line is spilled as it arrives, and stored from disk,
// decoded on the way). SPILLWAY_BIG sets the size (1 GiB passes).
func TestBigOffloadStdio(t *testing.T) {
	n := bigSize(t)
	var block string
	if err := json.Unmarshal(append(append([]byte{'"'}, bigBlock...), '"'), &block); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"text", "image"} {
		t.Run(kind, func(t *testing.T) {
			want := sha256.New()
			mode := "spillbig"
			if kind == "image" {
				mode = "spillimage"
				imageBytes(want, n)
			} else {
				for k := 0; k < n; k += len(bigBlock) {
					io.WriteString(want, block)
				}
			}
			svc := newService(t)
			eng, err := policy.New(context.Background(), policy.Options{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := mcpproxy.New(mcpproxy.Options{
				Upstream:  &mcpproxy.CommandUpstream{Command: os.Args[0], Args: []string{"-test.run=^TestSpillChild$", "--", mode, strconv.Itoa(n)}},
				Artifacts: svc, Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{}),
				SpillDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			url := serve(t, p)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a deadlock guard
			defer cancel()
			idle := idleRSS(t)
			start := time.Now()
			resp, err := statelessPost(ctx, url, 7, "tools/call", map[string]any{"name": "export", "arguments": map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			took := time.Since(start)
			peak := procStatus(t, "VmHWM")
			t.Logf("%d MB %s offloaded in %v: idle RSS %d MB, peak %d MB (+%d MB); the agent got %d bytes",
				n>>20, kind, took.Round(time.Millisecond), idle>>20, peak>>20, (peak-idle)>>20, len(body))
			if err != nil || len(body) > 8000 {
				t.Fatalf("the agent got %d bytes (%v): %.300s", len(body), err, body)
			}
			if peak-idle > 64<<20 {
				t.Errorf("peak RSS %d MB above idle, over 64 MB", (peak-idle)>>20)
			}
			var sum [32]byte
			copy(sum[:], want.Sum(nil))
			if got := artifactSum(t, svc, bytes.ReplaceAll(body, []byte(`\"`), []byte(`"`)), 0); got != sum {
				t.Errorf("the artifact is not the %s sent", kind)
			}
		})
	}
}
