package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/policy/policytest"
)

// rsTools are the pinned Node and npm packages `make tools` installs, and
// the scripts under testdata/realservers that run on them.
type rsTools struct {
	node, npm, scripts string
}

func rsSetup(t *testing.T) rsTools {
	t.Helper()
	rt := rsTools{node: tool(t, "SPILLWAY_NODE"), npm: tool(t, "SPILLWAY_NPM")}
	var err error
	if rt.scripts, err = filepath.Abs("testdata/realservers"); err != nil {
		t.Fatal(err)
	}
	return rt
}

// package's entry point in the npm folder.
func (rt rsTools) bin(pkg string) string {
	return filepath.Join(rt.npm, "@modelcontextprotocol", pkg, "dist", "index.js")
}

// start runs a script of testdata/realservers on the pinned Node, with
// pipes to its stdin and from its stdout.
func (rt rsTools) start(t *testing.T, ctx context.Context, stderr io.Writer, script string, args ...string) (*exec.Cmd, io.WriteCloser, io.ReadCloser) {
	t.Helper()
	cmd := exec.CommandContext(ctx, rt.node, append([]string{filepath.Join(rt.scripts, script)}, args...)...)
	cmd.Env = append(os.Environ(), "SPILLWAY_NPM="+rt.npm)
	cmd.Stderr = stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, in, out
}

// rsCall is one tools/call a client makes.
type rsCall struct {
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
}

// rsReport is what client.mjs printed for one call.
type rsReport struct {
	Name      string          `json:"name"`
	Result    json.RawMessage `json:"result"`
	Error     string          `json:"error"`
	WireBytes int             `json:"wireBytes"`
	// Message is the JSON-RPC response as it arrived, when under 1 MiB.
	Message string `json:"message"`
}

// wireResult is the result member of the response as it arrived.
func (r rsReport) wireResult() json.RawMessage {
	var m struct {
		Result json.RawMessage `json:"result"`
	}
	json.Unmarshal([]byte(r.Message), &m)
	return m.Result
}

// rsResult is the part of a CallToolResult the checks read.
type rsResult struct {
	Content    []rsItem        `json:"content"`
	Structured json.RawMessage `json:"structuredContent"`
	IsError    bool            `json:"isError"`
	Meta       struct {
		Replaced []rsReplaced `json:"dev.spillway/replaced"`
	} `json:"_meta"`
}

type rsItem struct {
	Type    string `json:"type"`
	Text    string `json:"text"`
	Data    string `json:"data"`
	URI     string `json:"uri"`
	HTTPURL string `json:"httpUrl"`
	Meta    struct {
		Link struct {
			HTTPURL          string `json:"httpUrl"`
			HTTPURLExpiresAt string `json:"httpUrlExpiresAt"`
			SHA256           string `json:"sha256"`
		} `json:"dev.spillway/link"`
	} `json:"_meta"`
}

type rsReplaced struct {
	Pointer string `json:"pointer"`
	URI     string `json:"uri"`
	HTTPURL string `json:"httpUrl"`
	SHA256  string `json:"sha256"`
}

// rsHTTP and rsStdio say how client.mjs reaches its server.
func rsHTTP(url, token string) []string { return []string{"http", url, token} }

func rsStdio(env map[string]string, argv ...string) []string {
	a, _ := json.Marshal(argv)
	if env == nil {
		env = map[string]string{}
	}
	e, _ := json.Marshal(env)
	return []string{"stdio", string(a), string(e)}
}

// rsClient runs client.mjs on the TypeScript SDK sdk ("v1" or "v2") against
// the server conn names, makes the calls in order and returns the tools it
// listed and one report per call. The client stays connected until the
// test ends (a stdio Spillway it started serves the links until then). A
// client that cannot connect or list fails the test.
func rsClient(t *testing.T, rt rsTools, sdk string, conn []string, calls ...rsCall) ([]string, []rsReport) {
	t.Helper()
	cj, _ := json.Marshal(calls)
	// A deadlock guard, not a timing check.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	stderr := new(policytest.Buffer)
	cmd, in, out := rt.start(t, ctx, stderr, "client.mjs", append(append([]string{sdk}, conn...), string(cj))...)
	t.Cleanup(func() {
		defer cancel()
		in.Close()
		io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil {
			t.Errorf("client %s %s: %v; stderr:\n%s", sdk, conn[0], err, rsTail(stderr.String()))
		}
	})
	dec := json.NewDecoder(bufio.NewReaderSize(out, 1<<20))
	var head struct {
		Tools []string `json:"tools"`
		Error string   `json:"error"`
	}
	if err := dec.Decode(&head); err != nil || head.Error != "" {
		t.Fatalf("client %s %s: %v, connect/list error %q; stderr:\n%s", sdk, conn[0], err, head.Error, rsTail(stderr.String()))
	}
	reps := make([]rsReport, len(calls))
	for i := range reps {
		if err := dec.Decode(&reps[i]); err != nil {
			t.Fatalf("client %s %s: report %d: %v; stderr:\n%s", sdk, conn[0], i, err, rsTail(stderr.String()))
		}
	}
	return head.Tools, reps
}

func rsTail(s string) string {
	if len(s) > 4000 {
		return s[len(s)-4000:]
	}
	return s
}

// rsSpillway runs the built `spillway serve` on a free loopback port with
// a data dir of its own and returns its base URL and the /mcp token. The
// real binary, not the race-instrumented test: it carries tens of MB per
// call here, and the other tests cover races.
func rsSpillway(t *testing.T, extra ...string) (string, string) {
	t.Helper()
	data := t.TempDir()
	return rsSpillwayIn(t, data, extra...), mcpToken(t, data)
}

// rsSpillwayIn is rsSpillway with data as its data dir, for a test that
// gives its own tokens; it returns the base URL.
func rsSpillwayIn(t *testing.T, data string, extra ...string) string {
	t.Helper()
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data", data, "--log-format", "json"}, extra...)
	cmd := exec.Command(spillwayBin(t), args...)
	errp, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	log := new(policytest.Buffer)
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("spillway serve: %v; stderr:\n%s", err, rsTail(log.String()))
		}
	})
	lines := bufio.NewReader(errp)
	for {
		line, err := lines.ReadString('\n')
		log.Write([]byte(line))
		if err != nil {
			t.Fatalf("spillway serve did not start: %v; stderr:\n%s", err, rsTail(log.String()))
		}
		var l struct{ Msg, Addr string }
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "spillway listening" {
			go io.Copy(log, lines)
			return l.Addr
		}
	}
}

// rsListServer starts testdata/realservers/listserver.mjs and returns its
// /mcp URL.
func rsListServer(t *testing.T, rt rsTools) string {
	t.Helper()
	return rsHTTPServer(t, rt, "listserver.mjs", "0")
}

// rsHTTPServer starts a server script of testdata/realservers that prints
// "listening URL" and returns URL.
func rsHTTPServer(t *testing.T, rt rsTools, script string, args ...string) string {
	t.Helper()
	cmd, _, out := rt.start(t, context.Background(), os.Stderr, script, args...)
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		t.Fatalf("%s printed %q: %v", script, line, err)
	}
	go io.Copy(io.Discard, out)
	return url
}

func rsSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// rsOriginals are the SHA-256 sums of what an upstream sent in a result,
// each with what it is: every content item (text, or decoded data), the
// run of its text items as one group the way CONTRACT21 stores it (a JSON
// array when every text is JSON, else the texts joined by a blank line),
// and every top-level member of structuredContent (a string's text, else
// the member's JSON exactly as sent).
func rsOriginals(t *testing.T, raw json.RawMessage) map[string]string {
	t.Helper()
	var res rsResult
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	var texts []string
	allJSON := true
	for i, it := range res.Content {
		switch it.Type {
		case "text":
			sums[rsSum([]byte(it.Text))] = "content item " + strconv.Itoa(i)
			texts = append(texts, it.Text)
			allJSON = allJSON && json.Valid([]byte(it.Text))
		case "image", "audio":
			b, err := base64.StdEncoding.DecodeString(it.Data)
			if err != nil {
				t.Fatal(err)
			}
			sums[rsSum(b)] = "content item " + strconv.Itoa(i) + " decoded"
		}
	}
	if len(texts) > 1 {
		if allJSON {
			sums[rsSum([]byte("["+strings.Join(texts, ",")+"]"))] = "the text items as a JSON array"
		} else {
			sums[rsSum([]byte(strings.Join(texts, "\n\n")))] = "the text items joined"
		}
	}
	var members map[string]json.RawMessage
	json.Unmarshal(res.Structured, &members)
	for k, v := range members {
		var s string
		if json.Unmarshal(v, &s) == nil {
			sums[rsSum([]byte(s))] = "structuredContent." + k
		} else {
			sums[rsSum(v)] = "structuredContent." + k + " (JSON)"
		}
	}
	return sums
}

// rsGet fetches a link and returns its bytes' SHA-256, or "" with the test
// failed when it does not answer 200.
func rsGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Errorf("link %s: %v", url, err)
		return ""
	}
	defer resp.Body.Close()
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("link %s: %s, %v", url, resp.Status, err)
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}
