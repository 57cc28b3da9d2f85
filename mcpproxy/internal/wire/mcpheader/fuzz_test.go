package mcpheader

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// FuzzParamHeaders: Mcp-Param-* headers come from clients. Whatever a
// header says, the check does not panic and accepts only a value equal to
// the argument; and what Set (the client side) writes for an argument
// always passes the check for the same arguments.
func FuzzParamHeaders(f *testing.F) {
	for _, c := range [][2]string{
		{`"eu-west"`, "eu-west"}, {`" padded "`, "=?base64?IHBhZGRlZCA=?="}, {`42`, "42"}, {`true`, "true"},
		{`"=?base64?eA==?="`, "=?base64?eA==?="}, {`1e300`, "1e300"}, {`{"a":1}`, ""}, {`"é"`, "=?base64?w6k=?="},
		{`-0`, "0"}, {`42`, "42.0"},
	} {
		f.Add([]byte(c[0]), c[1])
	}
	bs := []Binding{{Path: []string{"region"}, Header: "Region"}}
	f.Fuzz(func(t *testing.T, arg []byte, header string) {
		params := []byte(`{"name":"t","arguments":{"region":` + string(arg) + `}}`)
		if !json.Valid(params) {
			return
		}
		h := http.Header{}
		setParams(h, bs, params)
		if v := h.Get("Mcp-Param-Region"); v != "" {
			if err := CheckParams(h, bs, params); err != nil {
				t.Fatalf("argument %s: header %q written, then refused: %v", arg, v, err)
			}
		}

		h = http.Header{"Mcp-Param-Region": {header}}
		if CheckParams(h, bs, params) != nil {
			return
		}
		var s string
		if json.Unmarshal(arg, &s) == nil {
			if v, err := Decode(header); err != nil || v != s {
				t.Fatalf("header %q accepted for argument %s", header, arg)
			}
		}
	})
}

// FuzzName: whatever the tool's name, the Mcp-Name that Set writes passes
// Check; whatever Mcp-Name a client sends, Check accepts it only when it
// decodes to the name in the body.
func FuzzName(f *testing.F) {
	for _, c := range [][2]string{{"get_weather", "get_weather"}, {"météo", "=?base64?bcOpdMOpbw==?="},
		{" x", " x"}, {"=?base64?eA==?=", "=?base64?eA==?="}, {"a\tb", "a\tb"}} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, name, header string) {
		n, _ := json.Marshal(name)
		m, err := jsonrpc.DecodeMessage([]byte(`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":` + string(n) +
			`,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`))
		if err != nil {
			return
		}
		want, _ := RoutingName(m) // invalid UTF-8 in name became U+FFFD
		h := http.Header{ProtocolVersion: {"2026-07-28"}}
		Set(h, m, nil)
		if err := Check(h, []*jsonrpc.Message{m}); err != nil {
			t.Fatalf("name %q: Set wrote %q, Check refused it: %v", want, h.Get(Name), err)
		}
		h.Set(Name, header)
		if Check(h, []*jsonrpc.Message{m}) == nil {
			if got, err := Decode(header); err != nil || got != want {
				t.Fatalf("name %q: Mcp-Name %q accepted", want, header)
			}
		}
	})
}

// FuzzRevision: a protocol revision comes from a client's header. Whatever
// it says, Revision accepts only the canonical form of a real date, and
// Stateless only such a date on or after FirstStateless.
func FuzzRevision(f *testing.F) {
	for _, v := range []string{"2026-07-28", "2025-11-25", "draft", "DRAFT-2026-v1", "", "2026-02-29", "2028-02-29",
		"2026-7-28", "2026-07-28\x00", "9999-12-31", "0000-01-01", "-001-01-01", "2026-07-28T00:00:00Z"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := Revision(v)
		if ok && d.Format(time.DateOnly) != v {
			t.Fatalf("Revision(%q) accepted a name that is not its date %s", v, d.Format(time.DateOnly))
		}
		if Stateless(v) && (!ok || v < FirstStateless) {
			t.Fatalf("Stateless(%q) for a revision that is not a date from %s on", v, FirstStateless)
		}
	})
}

// FuzzRevisionOrder holds Revision and AtLeast to what time.Parse makes of the
// names: the same dates, the same order.
func FuzzRevisionOrder(f *testing.F) {
	for _, s := range []string{"2025-06-18", "2025-11-25", "2026-07-28", "2024-02-29", "2023-02-29", "1900-02-29", "2000-02-29", "2025-13-01", "2025-00-10", "2025-04-31", "2025-4-30", "+025-01-01", "0000-01-01", "draft"} {
		f.Add(s, "2025-11-25")
	}
	f.Fuzz(func(t *testing.T, v, rev string) {
		parse := func(s string) (time.Time, bool) {
			if len(s) != len(time.DateOnly) {
				return time.Time{}, false
			}
			d, err := time.Parse(time.DateOnly, s)
			return d, err == nil
		}
		want, wok := parse(v)
		got, ok := Revision(v)
		if ok != wok || !got.Equal(want) {
			t.Fatalf("Revision(%q) = %v, %v; time.Parse: %v, %v", v, got, ok, want, wok)
		}
		r, rok := parse(rev)
		if at := AtLeast(v, rev); at != (wok && rok && !want.Before(r)) {
			t.Fatalf("AtLeast(%q, %q) = %v", v, rev, at)
		}
	})
}
