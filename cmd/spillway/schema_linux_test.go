package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/spillway-dev/spillway/policy/policytest"
)

// schemaServerBin builds testdata/schemaserver once per test binary.
var schemaServerBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "spillway-schemaserver-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "schemaserver")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/schemaserver").CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	return bin, nil
})

// rssOf returns a line's value in kB ("VmRSS", "VmHWM") of /proc/pid/status.
func rssOf(pid int, field string) int64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// Issue 38, items 1 and 4, against the real `spillway serve --stdio`: an
// upstream lists tools whose outputSchemas make validation exponential
// (1.3 KB of 20 anyOf levels; anyOf doubling at each of 20 levels of the
// value) and answers each call with 24 KB of structuredContent. Each call
// is answered, as a tool error with the value behind a link, and so is a
// ping after them; Spillway stays under 512 MiB. Before the fix neither
// call was answered and the process grew past 1 GiB (where this test
// stops it). A Zod-style schema's 300 rows come back shortened with the
// note, valid against the schema the client was shown.
func TestStdioHostileOutputSchemas(t *testing.T) {
	const (
		never    = 2 * time.Minute // "never answered", not a timing check
		rssLimit = 512 << 10       // kB
	)
	server, err := schemaServerBin()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(spillwayBin(t), "serve", "--stdio", "--data", t.TempDir(), "--listen", "127.0.0.1:0",
		"--log-level", "warn", "--upstream-cmd", server)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	stderr := new(policytest.Buffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	responses := make(chan map[string]json.RawMessage, 16)
	go func() {
		dec := json.NewDecoder(bufio.NewReader(stdout))
		for {
			var m map[string]json.RawMessage
			if dec.Decode(&m) != nil {
				close(responses)
				return
			}
			responses <- m
		}
	}()
	send := func(msg string) {
		if _, err := io.WriteString(stdin, msg+"\n"); err != nil {
			t.Fatalf("write %s: %v", msg, err)
		}
	}
	// await returns the response with id, failing when it never comes or
	// Spillway grows past rssLimit meanwhile.
	await := func(id string) map[string]json.RawMessage {
		t.Helper()
		deadline := time.After(never)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case m, ok := <-responses:
				if !ok {
					t.Fatalf("stdout closed before response %s; stderr:\n%s", id, stderr.String())
				}
				if string(m["id"]) == id {
					return m
				}
			case <-tick.C:
				if rss := rssOf(pid, "VmRSS"); rss > 2*rssLimit {
					cmd.Process.Kill()
					t.Fatalf("no response %s, and Spillway grew to %d MiB", id, rss>>10)
				}
			case <-deadline:
				t.Fatalf("no response %s within %v (RSS %d MiB)", id, never, rssOf(pid, "VmRSS")>>10)
			}
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	await("1")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	var list struct {
		Tools []struct {
			Name         string          `json:"name"`
			OutputSchema json.RawMessage `json:"outputSchema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(await("2")["result"], &list); err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	shown := map[string]string{} // the outputSchemas as the client is shown them
	for _, tl := range list.Tools {
		shown[tl.Name] = string(tl.OutputSchema)
	}
	type callResult struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	call := func(id int, name string) callResult {
		t.Helper()
		send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{}}}`, id, name))
		m := await(strconv.Itoa(id))
		var r callResult
		if err := json.Unmarshal(m["result"], &r); err != nil {
			t.Fatalf("%s: not a result: %.300s", name, m["error"])
		}
		return r
	}
	for i, name := range []string{"anyof", "deep"} {
		r := call(10+i, name)
		linked := len(r.Content) > 0 && strings.Contains(r.Content[len(r.Content)-1].Text, "http://")
		if !r.IsError || r.StructuredContent != nil || !linked {
			t.Errorf("%s: isError %v, structuredContent %.100s, content %+v; want a tool error with the value behind a link", name, r.IsError, r.StructuredContent, r.Content)
		}
	}
	send(`{"jsonrpc":"2.0","id":20,"method":"ping"}`)
	if m := await("20"); string(m["result"]) != "{}" {
		t.Errorf("ping: %s", m["result"])
	}

	r := call(30, "zod")
	var sc map[string]json.RawMessage
	json.Unmarshal(r.StructuredContent, &sc)
	if r.IsError || !strings.Contains(string(sc["_spillway"]), "http://") {
		t.Errorf("zod: isError %v, structuredContent without a note naming its link: %.300s", r.IsError, r.StructuredContent)
	}
	var s jsonschema.Schema
	json.Unmarshal([]byte(shown["zod"]), &s)
	rs, err := s.Resolve(nil)
	var v any
	json.Unmarshal(r.StructuredContent, &v)
	if err != nil || rs.Validate(v) != nil {
		t.Errorf("zod: structuredContent does not validate against the schema shown (%v): %v\nschema %s", err, rs.Validate(v), shown["zod"])
	}
	if hwm := rssOf(pid, "VmHWM"); hwm > rssLimit {
		t.Errorf("Spillway's RSS peaked at %d MiB, more than %d", hwm>>10, rssLimit>>10)
	} else {
		t.Logf("Spillway's RSS peaked at %d MiB", hwm>>10)
	}
}
