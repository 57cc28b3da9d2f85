package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as a scripted stdio MCP server for the real
// binary's --upstream-cmd: run as `<test binary> -test.run=^TestFacesChild$
// -- faces`, it serves on its stdin and stdout. initialize is answered in
// the client's revision; ping with {}; tools/call "big" with one progress
// notification (when the call carries a progressToken) and then, at once,
// a result of facesText bytes of text. Whatever else is a request gets
// -32601. It writes each call's progress and result before it reads the
// next line, so the upstream's order is fixed: a call sent before a ping
// is answered before it.
func TestFacesChild(t *testing.T) {
	if len(os.Args) < 2 || os.Args[len(os.Args)-1] != "faces" {
		t.Skip("the scripted child of TestPingWhileStoring")
	}
	out := bufio.NewWriter(os.Stdout)
	send := func(v any) {
		b, _ := json.Marshal(v)
		out.Write(append(b, '\n'))
		out.Flush()
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				ProtocolVersion string `json:"protocolVersion"`
				Name            string `json:"name"`
				Meta            struct {
					Token json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil || m.Method == "" {
			continue // a notification, or a response
		}
		result := func(r any) { send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": r}) }
		switch {
		case m.Method == "initialize":
			result(map[string]any{"protocolVersion": m.Params.ProtocolVersion, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "faces", "version": "1"}})
		case m.Method == "ping":
			result(map[string]any{})
		case m.Method == "tools/call" && m.Params.Name == "big":
			if m.Params.Meta.Token != nil {
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress",
					"params": map[string]any{"progressToken": m.Params.Meta.Token, "progress": 1, "total": 2}})
			}
			result(map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat("row of a large result\n", facesText/22)}}})
		default:
			send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "no such method"}})
		}
	}
	os.Exit(0) // before the test framework writes PASS to stdout, which is the proxy's
}

// facesText is the size of the "big" tool's text: well past the 16 KiB
// text threshold, so its result is stored.
const facesText = 1 << 20

// The real binary's stdio face answers each line that is not a request it
// may pass on with the JSON-RPC error that lets a client go on (id null),
// and forwards none of them: a line in, a line out, and the next ping is
// answered next.
func TestStdioAnswersInvalidLines(t *testing.T) {
	stdin, lines := startStdio(t, nil)
	exchange := func(line string) string {
		t.Helper()
		io.WriteString(stdin, line+"\n")
		select {
		case got, ok := <-lines:
			if !ok {
				t.Fatalf("after %s: the output ended", line)
			}
			return strings.TrimSpace(got)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: never answered", line)
		}
		return ""
	}
	type answer struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	read := func(line string) (a answer) {
		json.Unmarshal([]byte(line), &a)
		return a
	}
	if got := exchange(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`); read(got).Result == nil {
		t.Fatalf("initialize: %.300s", got)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	for i, tt := range []struct {
		name, line string
		code       int
	}{
		{"a request with id null", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, -32600},
		{"a batch", `[{"jsonrpc":"2.0","id":5,"method":"ping"}]`, -32600},
		{"a line that is not JSON", `ping, please`, -32700},
		{"cut JSON", `{"jsonrpc":"2.0","id":6,"method":"pi`, -32700},
		{"an id that is an object", `{"jsonrpc":"2.0","id":{"n":7},"method":"ping"}`, -32600},
		{"an id that is true", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, -32600},
	} {
		got := exchange(tt.line)
		m := read(got)
		if m.Error == nil || m.Error.Code != tt.code || string(m.ID) != "null" {
			t.Errorf("%s: answered %.300s; want a %d error with id null", tt.name, got, tt.code)
		} else {
			t.Logf("%s: %s", tt.name, m.Error.Message)
		}
		// Nothing reached the upstream: the next line is the next ping's.
		id := fmt.Sprint(100 + i)
		if got := exchange(`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`); string(read(got).ID) != id || read(got).Result == nil {
			t.Fatalf("%s: the ping after it got %.300s", tt.name, got)
		}
	}
}

// facesChild is the --upstream-cmd of TestFacesChild.
func facesChild() string { return os.Args[0] + " -test.run=^TestFacesChild$ -- faces" }

// startStdio runs the real binary's stdio face in front of facesChild,
// with env (nil: this process's) and extra flags, until t ends, and
// returns its input and its output's lines.
func startStdio(t *testing.T, env []string, extra ...string) (io.WriteCloser, <-chan string) {
	t.Helper()
	cmd := exec.Command(spillwayBin(t), append([]string{"serve", "--stdio", "--data", t.TempDir(), "--listen", "127.0.0.1:0",
		"--log-level", "warn", "--upstream-cmd", facesChild()}, extra...)...)
	cmd.Env = env
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Wait()
		if t.Failed() {
			t.Logf("spillway stderr:\n%s", stderr.String())
		}
	})
	return stdin, readLines(stdout)
}

// startBinary runs the real binary with args and env (nil: this
// process's) until t ends, killing it then, and logs its stderr if t
// failed.
func startBinary(t *testing.T, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(spillwayBin(t), args...)
	cmd.Env = env
	var stderr strings.Builder // written by the process's copier, read after Wait
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("spillway stderr:\n%s", stderr.String())
		}
	})
	return cmd
}

// readLines yields r's lines, and is closed when r ends.
func readLines(r io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		br := bufio.NewReaderSize(r, 1<<20)
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			lines <- l
		}
	}()
	return lines
}
