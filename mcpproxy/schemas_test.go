package mcpproxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"testing"

	"github.com/spillway-dev/spillway/mcpproxy"
	"github.com/spillway-dev/spillway/policy"
)

// rowsResult is the part of a tools/call result of the scripted child's
// "strict" or "closed" that the checks read.
type rowsResult struct {
	Structured *struct {
		Rows []json.RawMessage `json:"rows"`
		Note string            `json:"_spillway"`
	} `json:"structuredContent"`
	IsError bool `json:"isError"`
	Meta    struct {
		Replaced []json.RawMessage `json:"dev.spillway/replaced"`
	} `json:"_meta"`
}

// On the stdio face, tools/calls of a client that listed the tools before
// (through another Spillway, or before a restart) reach a Spillway that
// never saw the listing. Spillway lists the child's tools itself, on the
// client's connection, before it shrinks: "strict" (minItems 50) keeps
// no cut array, and "closed" is shrunk against its schema, with the note
// the schema was given room for. When the listing fails, neither is cut:
// each becomes a tool error carrying its link. Before, both were cut to
// five rows against no schema, which "strict"'s client rejects.
func TestStdioFaceLearnsUnseenSchema(t *testing.T) {
	for _, mode := range []string{"rows", "rowsbroken"} {
		t.Run(mode, func(t *testing.T) {
			svc := newService(t)
			eng, err := policy.New(context.Background(), policy.Options{})
			if err != nil {
				t.Fatal(err)
			}
			cmd, args := childCmd(mode)
			p, err := mcpproxy.New(mcpproxy.Options{Upstream: &mcpproxy.CommandUpstream{Command: cmd, Args: args}, Artifacts: svc,
				Offloader: mcpproxy.NewOffloader(svc, eng, mcpproxy.OffloadOptions{}), SpillDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			call := stdioClient(t, ctx, p)
			call(1, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t", "version": "1"}})
			call(0, "notifications/initialized", nil)
			for i, tool := range []string{"strict", "closed"} {
				raw := call(2+i, "tools/call", map[string]any{"name": tool, "arguments": map[string]any{}})
				var r rowsResult
				if err := json.Unmarshal(raw, &r); err != nil {
					t.Fatalf("%s: %v: %.300s", tool, err, raw)
				}
				if len(r.Meta.Replaced) == 0 {
					t.Errorf("%s: no link: %.500s", tool, raw)
				}
				switch {
				case tool == "closed" && mode == "rows": // learned, and shrunk against it
					if r.IsError || r.Structured == nil || len(r.Structured.Rows) == 0 || len(r.Structured.Rows) >= 300 || r.Structured.Note == "" {
						t.Errorf("%s, schema listed: want a few rows and the note: %.500s", tool, raw)
					}
				case r.Structured != nil && len(r.Structured.Rows) < 50:
					t.Errorf("%s: %d rows inline, under the schema's minItems 50 (or the schema is unknown): %.500s", tool, len(r.Structured.Rows), raw)
				case mode == "rowsbroken" && !r.IsError:
					t.Errorf("%s, listing failed: want a tool error with the link: %.500s", tool, raw)
				}
			}
		})
	}
}

// stdioClient serves a client of p's stdio face until the test ends, and
// returns how it sends: a request (id > 0), whose result it waits for, or
// a notification (id 0).
func stdioClient(t *testing.T, ctx context.Context, p *mcpproxy.Proxy) func(id int, method string, params any) json.RawMessage {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	t.Cleanup(func() { inW.Close() })
	go p.ServeStdio(ctx, inR, outW)
	rd := bufio.NewReaderSize(outR, 1<<20)
	return func(id int, method string, params any) json.RawMessage {
		t.Helper()
		m := map[string]any{"jsonrpc": "2.0", "method": method}
		if params != nil {
			m["params"] = params
		}
		if id == 0 {
			b, _ := json.Marshal(m)
			fmt.Fprintf(inW, "%s\n", b)
			return nil
		}
		m["id"] = id
		b, _ := json.Marshal(m)
		fmt.Fprintf(inW, "%s\n", b)
		for {
			line, err := rd.ReadBytes('\n')
			if err != nil {
				t.Fatalf("no answer to %s: %v (ctx: %v)", method, err, ctx.Err())
			}
			var m struct {
				ID     int             `json:"id"`
				Result json.RawMessage `json:"result"`
			}
			if json.Unmarshal(line, &m) == nil && m.ID == id {
				return m.Result
			}
		}
	}
}
