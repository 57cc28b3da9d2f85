package mcpheader

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// The encoding examples of the 2026-07-28 transport spec.
func TestEncode(t *testing.T) {
	for _, tt := range [][2]string{
		{"us-west1", "us-west1"},
		{"Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="},
		{" padded ", "=?base64?IHBhZGRlZCA=?="},
		{"line1\nline2", "=?base64?bGluZTEKbGluZTI=?="},
		{"=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
		{"=?base64?no suffix", "=?base64?no suffix"},
		{"", ""},
	} {
		if got := Encode(tt[0]); got != tt[1] {
			t.Errorf("Encode(%q) = %q; want %q", tt[0], got, tt[1])
		}
		if got, err := Decode(tt[1]); err != nil || got != tt[0] {
			t.Errorf("Decode(%q) = %q, %v; want %q", tt[1], got, err, tt[0])
		}
	}
	for _, bad := range []string{"=?base64?***?=", "=?base64?eA?=", "é", "a\x00b", "a\nb"} {
		if got, err := Decode(bad); err == nil {
			t.Errorf("Decode(%q) = %q; want an error", bad, got)
		}
	}
}

func msg(_ testing.TB, s string) *jsonrpc.Message { return jsonrpc.MustDecode(s) }

func call(name string) string {
	n, _ := json.Marshal(name)
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":` + string(n) +
		`,"arguments":{"region":"eu","n":42},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
}

// Set writes what Check accepts; a name a header cannot carry as it is
// travels encoded, and is decoded before it is compared (the proxy used to
// send it raw and compare it raw).
func TestSetCheck(t *testing.T) {
	bs := []Binding{{Path: []string{"region"}, Header: "Region"}, {Path: []string{"n"}, Header: "N"}}
	for _, name := range []string{"get_weather", "météo", " padded", "=?base64?x?="} {
		m := msg(t, call(name))
		h := http.Header{ProtocolVersion: {"2026-07-28"}}
		Set(h, m, bs)
		if err := Check(h, []*jsonrpc.Message{m}); err != nil {
			t.Errorf("%q: Check = %v (Mcp-Name %q)", name, err, h.Get(Name))
		}
		if err := CheckParams(h, bs, m.Params); err != nil {
			t.Errorf("%q: CheckParams = %v", name, err)
		}
		if got := h.Get(Name); got != name && !strings.HasPrefix(got, "=?base64?") {
			t.Errorf("%q: Mcp-Name %q", name, got)
		}
	}
	m := msg(t, `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"file:///ü"}}`)
	h := http.Header{}
	Set(h, m, nil)
	if h.Get(Method) != "resources/read" || h.Get(Name) != "=?base64?ZmlsZTovLy/DvA==?=" {
		t.Errorf("resources/read: %v", h)
	}
}

func TestCheck(t *testing.T) {
	body := call("météo")
	encoded := Encode("météo")
	tests := []struct {
		name    string
		body    string
		headers map[string]string
		code    int // 0: accepted
		want    string
	}{
		{"encoded name", body, map[string]string{ProtocolVersion: "2026-07-28", Method: "tools/call", Name: encoded}, 0, ""},
		{"raw non-ASCII name", body, map[string]string{ProtocolVersion: "2026-07-28", Method: "tools/call", Name: "météo"}, CodeHeaderMismatch, "invalid character"},
		{"other name", body, map[string]string{ProtocolVersion: "2026-07-28", Method: "tools/call", Name: Encode("meteo!")}, CodeHeaderMismatch, "does not match"},
		{"no name", body, map[string]string{ProtocolVersion: "2026-07-28", Method: "tools/call"}, CodeHeaderMismatch, "missing required Mcp-Name"},
		{"bad base64", body, map[string]string{ProtocolVersion: "2026-07-28", Method: "tools/call", Name: "=?base64?%%?="}, CodeHeaderMismatch, "invalid base64"},
		{"no method", body, map[string]string{ProtocolVersion: "2026-07-28", Name: encoded}, CodeHeaderMismatch, "missing required Mcp-Method"},
		{"other method", body, map[string]string{ProtocolVersion: "2026-07-28", Method: "tools/list", Name: encoded}, CodeHeaderMismatch, "Mcp-Method header does not match"},
		{"no version header", body, map[string]string{Method: "tools/call", Name: encoded}, CodeHeaderMismatch, "Mcp-Protocol-Version header is required"},
		{"versions differ", body, map[string]string{ProtocolVersion: "2026-08-01", Method: "tools/call", Name: encoded}, CodeHeaderMismatch, "does not match _meta"},
		{"stateless header, no _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, map[string]string{ProtocolVersion: "2026-07-28", Method: "tools/list"}, jsonrpc.CodeInvalidParams, "missing or invalid _meta"},
		{"session era: not checked", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, map[string]string{ProtocolVersion: "2025-11-25"}, 0, ""},
		{"unknown revision: not stateless", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, map[string]string{ProtocolVersion: "draft"}, 0, ""},
		{"unknown revision in _meta too", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"DRAFT-2026-v1"}}}`, map[string]string{ProtocolVersion: "DRAFT-2026-v1"}, 0, ""},
		{"a notification: not checked", `{"jsonrpc":"2.0","method":"notifications/x"}`, nil, 0, ""},
	}
	for _, tt := range tests {
		h := http.Header{}
		for k, v := range tt.headers {
			h.Set(k, v)
		}
		err := Check(h, []*jsonrpc.Message{msg(t, tt.body)})
		var e *Error
		switch {
		case tt.code == 0 && err != nil:
			t.Errorf("%s: Check = %v", tt.name, err)
		case tt.code != 0 && (!errors.As(err, &e) || e.Code != tt.code || !strings.Contains(e.Message, tt.want)):
			t.Errorf("%s: Check = %v; want code %d, %q", tt.name, err, tt.code, tt.want)
		}
	}
}

func TestCheckParams(t *testing.T) {
	bs := []Binding{{Path: []string{"region"}, Header: "Region"}, {Path: []string{"opt", "n"}, Header: "N"}}
	params := `{"name":"t","arguments":{"region":"eu","opt":{"n":42}}}`
	for _, tt := range []struct {
		name, params, region, n, want string
	}{
		{"match", params, "eu", "42", ""},
		{"integer compared as a number", params, "eu", "42.0", ""},
		{"mismatch", params, "us", "42", "Mcp-Param-Region header does not match"},
		{"missing", params, "", "42", "missing Mcp-Param-Region"},
		{"for an absent argument", `{"name":"t","arguments":{"opt":{"n":42}}}`, "eu", "42", "for an absent argument"},
		{"null argument, no header", `{"name":"t","arguments":{"region":null,"opt":{"n":42}}}`, "", "42", ""},
	} {
		h := http.Header{}
		if tt.region != "" {
			h.Set("Mcp-Param-Region", tt.region)
		}
		h.Set("mcp-param-n", tt.n) // header names are case-insensitive
		err := CheckParams(h, bs, []byte(tt.params))
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: CheckParams = %v; want %q", tt.name, err, tt.want)
		}
	}
}

func TestToolsLearn(t *testing.T) {
	var tools Tools
	next := tools.Learn([]byte(`{"tools":[{"name":"q","inputSchema":{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"bad":{"type":"string","x-mcp-header":"No Spaces"},
		"opt":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}}}}},
		{"name":"plain","inputSchema":{"type":"object"}}],"nextCursor":"c2"}`))
	if next != "c2" {
		t.Errorf("nextCursor %q", next)
	}
	bs, ok := tools.Lookup("q")
	got := fmt.Sprint(bs)
	if !ok || len(bs) != 2 || !strings.Contains(got, "{[region] Region}") || !strings.Contains(got, "{[opt n] N}") {
		t.Errorf("Lookup(q) = %v, %v", bs, ok)
	}
	if bs, ok := tools.Lookup("plain"); !ok || len(bs) != 0 {
		t.Errorf("Lookup(plain) = %v, %v", bs, ok)
	}
	if _, ok := tools.Lookup("unknown"); ok {
		t.Error("an unknown tool is known")
	}
}

// Revisions are dates: compared as dates, and a name that is no date is an
// unknown revision, never one "newer" than 2026-07-28 (as "draft" is to a
// string comparison).
func TestRevisions(t *testing.T) {
	for v, want := range map[string]bool{
		"2026-07-28": true, "2026-07-29": true, "2027-01-01": true, "9999-12-31": true,
		"2025-11-25": false, "2025-03-26": false, "2026-07-27": false,
		"draft": false, "DRAFT-2026-v1": false, "latest": false, "": false, "zzzz": false,
		"2026-7-28": false, "2026-07-28 ": false, " 2026-07-28": false, "2026-13-01": false,
		"2026-02-30": false, "2026/07/28": false, "+026-07-28": false,
	} {
		if got := Stateless(v); got != want {
			t.Errorf("Stateless(%q) = %v, want %v", v, got, want)
		}
	}
	if !AtLeast("2025-06-18", "2025-06-18") || !AtLeast("2025-11-25", "2025-06-18") || AtLeast("2025-03-26", "2025-06-18") {
		t.Error("AtLeast does not order dated revisions")
	}
	if AtLeast("draft", "2025-06-18") || AtLeast("2025-06-18", "draft") || AtLeast("draft", "draft") {
		t.Error("an unknown revision compared with something")
	}
}

// BenchmarkAtLeast: the version check every request makes.
func BenchmarkAtLeast(b *testing.B) {
	for b.Loop() {
		if !AtLeast("2026-07-28", "2025-11-25") {
			b.Fatal("order")
		}
	}
}
