package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact/s3store/miniotest"
)

// facesStore starts MinIO behind a fault proxy and returns the proxy, the
// --store URL of a bucket on it and the environment that reaches it. The
// store's own deadlines are long (a minute), so a hung store holds an
// upload until the test lets it go.
func facesStore(t *testing.T) (proxy *miniotest.FaultProxy, store string, env []string) {
	t.Helper()
	srv := miniotest.Start(t)
	proxy = miniotest.NewFaultProxy(t, srv.Endpoint)
	store = fmt.Sprintf("s3://faces?endpoint=%s&secure=false&create=true&region=us-east-1&timeout=1m&idle-timeout=1m", proxy.Addr)
	return proxy, store, append(os.Environ(), "AWS_ACCESS_KEY_ID="+srv.AccessKey, "AWS_SECRET_ACCESS_KEY="+srv.SecretKey)
}

// storeHold is how long a test waits for a ping while a large result is
// stored before it lets the store go on: far longer than a ping takes
// when nothing holds it (milliseconds), far shorter than the store's own
// deadline.
const storeHold = 15 * time.Second

// A large result whose store hangs holds only its own response: a ping
// sent after the call, on the same session and face, is answered while
// the result is still being stored, and so before the call's response;
// the call's progress notification still comes before its response. On
// the real binary's stdio face and on a session of its HTTP face (the
// terminating one, in front of a stdio child).
func TestPingWhileStoring(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"big","arguments":{},"_meta":{"progressToken":"big-1"}}}`
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

	t.Run("stdio", func(t *testing.T) {
		proxy, store, env := facesStore(t)
		stdin, lines := startStdio(t, env, "--store", store)
		io.WriteString(stdin, initialize+"\n")
		if l := <-lines; !strings.Contains(l, `"id":1`) {
			t.Fatalf("initialize: %.300s", l)
		}
		io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
		proxy.Set(miniotest.Hang)
		got := make(chan string, 8)
		go func() {
			for l := range lines {
				got <- faceMessage(l)
			}
		}()
		io.WriteString(stdin, call+"\n")
		ping := func(id int) { fmt.Fprintf(stdin, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`+"\n", id) }
		checkFaceOrder(t, awaitPing(t, proxy, got, ping, nil))
	})

	t.Run("http", func(t *testing.T) {
		proxy, store, env := facesStore(t)
		data := t.TempDir()
		addr := rsFreeAddr(t)
		startBinary(t, env, "serve", "--data", data, "--listen", addr, "--log-level", "warn",
			"--upstream-cmd", facesChild(), "--store", store)
		base := "http://" + addr
		eventually(t, 30*time.Second, "spillway answers /healthz", func() bool {
			resp, err := http.Get(base + "/healthz")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil
		})
		url, tok := base+"/mcp", mcpToken(t, data)
		resp := mcpPost(t, url, tok, "", initialize)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		session := resp.Header.Get("Mcp-Session-Id")
		if session == "" {
			t.Fatalf("initialize: %s, no session", resp.Status)
		}
		mcpPost(t, url, tok, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
		proxy.Set(miniotest.Hang)

		// Everything the client gets, on either stream, lands in got in
		// the order it was read.
		got := make(chan string, 8)
		big := mcpPost(t, url, tok, session, call)
		defer big.Body.Close()
		go func() {
			sc := bufio.NewScanner(big.Body)
			sc.Buffer(nil, 4<<20)
			for sc.Scan() {
				if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok && strings.TrimSpace(d) != "" {
					got <- faceMessage(d)
				}
			}
		}()
		// Once the progress came, the child has written the call's result
		// too, before it reads the ping.
		if first := <-got; first != "progress" {
			t.Fatalf("the call's stream opened with %q, want its progress", first)
		}
		ping := func(id int) {
			go func() {
				resp := mcpPost(t, url, tok, session, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, id))
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				got <- faceMessage(string(b))
			}()
		}
		checkFaceOrder(t, awaitPing(t, proxy, got, ping, []string{"progress"}))
	})
}

// awaitPing sends a ping (id 3) with ping, and a second (id 4) once the
// first is answered, and reads what the client gets (named by
// faceMessage) after order until the large call's response, and returns
// it all. The store goes on (proxy passes) once both pings were answered,
// or after storeHold without: then the test fails, since two streams
// written at once would say nothing by their order.
func awaitPing(t *testing.T, proxy *miniotest.FaultProxy, got <-chan string, ping func(id int), order []string) []string {
	t.Helper()
	hold := time.NewTimer(storeHold)
	defer hold.Stop()
	never := time.NewTimer(2 * time.Minute)
	defer never.Stop()
	sent, pinged := time.Now(), 0
	ping(3) // right after the call: the upstream answers it after the call's result
	for !slices.Contains(order, "response") {
		select {
		case what := <-got:
			order = append(order, what)
			if what != "ping" || slices.Contains(order, "response") {
				continue
			}
			pinged++
			t.Logf("ping %d was answered in %v while the large result was being stored", pinged, time.Since(sent).Round(time.Millisecond))
			if pinged == 1 {
				sent = time.Now()
				ping(4) // with nothing but the store before it
			} else {
				proxy.Set(miniotest.Pass)
			}
		case <-hold.C:
			t.Errorf("no ping answered within %v while the large result was being stored", storeHold)
			proxy.Set(miniotest.Pass)
		case <-never.C:
			t.Fatalf("never answered: %q", order)
		}
	}
	return order
}

// faceMessage names a message the client got: "progress", "ping" (a
// ping's response), "response" (the big call's, its result stored) or the
// line itself.
func faceMessage(l string) string {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
	}
	if i := strings.Index(l, "{"); i >= 0 {
		l = l[i:] // an SSE body's first data line, or a JSON body
	}
	if err := json.NewDecoder(strings.NewReader(l)).Decode(&m); err != nil {
		return fmt.Sprintf("unreadable %.200q", l)
	}
	switch {
	case m.Method == "notifications/progress":
		return "progress"
	case (string(m.ID) == "3" || string(m.ID) == "4") && m.Result != nil:
		return "ping"
	case string(m.ID) == "2" && strings.Contains(string(m.Result), `"resource_link"`):
		return "response" // stored once the store went on
	}
	return fmt.Sprintf("%.300s", l)
}

// checkFaceOrder wants the call's progress, the two pings' answers and
// the call's response, in that order.
func checkFaceOrder(t *testing.T, order []string) {
	t.Helper()
	if strings.Join(order, " ") != "progress ping ping response" {
		t.Errorf("the client got %q; want the progress, the pings' answers, then the large call's response", order)
	}
}
