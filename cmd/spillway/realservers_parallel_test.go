package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/policy/policytest"
)

// TestRealServersParallelBridge: an agent runs 50 tool calls at once
// through Spillway with the TypeScript SDK v2 client pinned to
// 2026-07-28, which declares sampling and elicitation, in front of
// @modelcontextprotocol/server-everything (session era only), 10 of the
// calls asking the client for a sampling. Over stdio (a server request
// names no call there, so each call that can be asked holds one of
// --bridge-sessions sessions) the calls past the bound wait for a session
// instead of being refused; over Streamable HTTP (the server sends a
// call's requests on its own stream) they share one, with no wait allowed.
// Every call succeeds (before: 4 of 50 in both, the rest refused with
// "every upstream connection of this client is in use").
func TestRealServersParallelBridge(t *testing.T) {
	rt := rsSetup(t)
	index := rt.bin("server-everything")
	httpAddr := rsFreeAddr(t)
	rsRun(t, []string{"PORT=" + httpAddr[strings.LastIndex(httpAddr, ":")+1:]}, rt.node, index, "streamableHttp")
	rsListen(t, httpAddr)
	through := map[string][]string{
		"stdio": {"--upstream-cmd", rt.node + " " + index + " stdio"},
		// Refused at once if a call needed a session of its own.
		"http": {"--upstream-url", "http://" + httpAddr + "/mcp", "--bridge-wait", "0"},
	}
	const calls, sampling = 50, 10
	for _, mode := range []string{"stdio", "http"} {
		t.Run(mode, func(t *testing.T) {
			base, token := rsSpillway(t, through[mode]...)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a deadlock guard
			defer cancel()
			stderr := new(policytest.Buffer)
			cmd, in, out := rt.start(t, ctx, stderr, "parallelclient.mjs", base+"/mcp", token, strconv.Itoa(calls), strconv.Itoa(sampling))
			in.Close()
			var rep struct {
				OK     int      `json:"ok"`
				Errors []string `json:"errors"`
				Error  string   `json:"error"`
			}
			if err := json.NewDecoder(out).Decode(&rep); err != nil {
				t.Fatalf("parallelclient.mjs: %v; stderr:\n%s", err, rsTail(stderr.String()))
			}
			cmd.Wait()
			if rep.Error != "" {
				t.Fatalf("connect: %s", rep.Error)
			}
			t.Logf("%s: %d of %d parallel calls succeeded", mode, rep.OK, calls)
			if rep.OK != calls {
				t.Errorf("%d of %d parallel calls failed, first: %q", len(rep.Errors), calls, rep.Errors[:min(len(rep.Errors), 3)])
			}
		})
	}
}
