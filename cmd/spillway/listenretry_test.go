package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/policy/policytest"
)

// A session-era Streamable HTTP upstream behind a load balancer that
// answers the session's standing GET stream with 502 once (then serves
// it) still reaches its client: `spillway serve --stdio` opens the stream
// again, and a server notification sent on it afterwards arrives. (It used
// to stop listening for good at the first 502.)
func TestStdioUpstreamGETRefusedOnce(t *testing.T) {
	var gets atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			if gets.Add(1) == 1 {
				http.Error(w, "502 Bad Gateway", http.StatusBadGateway)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case http.MethodPost:
			body, _ := io.ReadAll(r.Body)
			if !strings.Contains(string(body), `"initialize"`) {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"lb","version":"1"}}}`)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	cmd := exec.Command(spillwayBin(t), "serve", "--stdio", "--data", t.TempDir(), "--listen", "127.0.0.1:0",
		"--log-level", "warn", "--upstream-url", "http://"+ln.Addr().String()+"/mcp")
	var stderr policytest.Buffer
	cmd.Stderr = &stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	fmt.Fprintln(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	fmt.Fprintln(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	got := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "notifications/tools/list_changed") {
				got <- sc.Text()
				return
			}
		}
	}()
	select {
	case <-got:
	case <-time.After(30 * time.Second): // a deadline for "never arrived"
		t.Fatalf("the server's notification never reached the client (%d GETs); stderr:\n%s", gets.Load(), stderr.String())
	}
	if n := gets.Load(); n != 2 {
		t.Errorf("%d GETs, want 2 (refused, then served)", n)
	}
}
