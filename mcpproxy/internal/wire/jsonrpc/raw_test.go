package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestSetPath(t *testing.T) {
	tests := []struct {
		in, v, want string
		keys        []string
		ok          bool
	}{
		{`{}`, `1`, `{"_meta":{"progressToken":1}}`, []string{"_meta", "progressToken"}, true},
		{`{"a":2}`, `"x"`, `{"a":2,"_meta":{"progressToken":"x"}}`, []string{"_meta", "progressToken"}, true},
		{`{"_meta":{"progressToken":"c","k":[1]},"z":1}`, `7`, `{"_meta":{"progressToken":7,"k":[1]},"z":1}`, []string{"_meta", "progressToken"}, true},
		{`{ "_meta" : { } }`, `7`, `{ "_meta" : { "t":7} }`, []string{"_meta", "t"}, true},
		{`{"_meta":3}`, `7`, ``, []string{"_meta", "t"}, false},
		{`[1]`, `7`, ``, []string{"a"}, false},
	}
	for _, tt := range tests {
		got, ok := SetPath([]byte(tt.in), []byte(tt.v), tt.keys...)
		if ok != tt.ok || (ok && string(got) != tt.want) {
			t.Errorf("SetPath(%s, %s, %v) = %s, %v; want %s, %v", tt.in, tt.v, tt.keys, got, ok, tt.want, tt.ok)
		}
	}
}

func TestMessageEdits(t *testing.T) {
	m, err := DecodeMessage([]byte(`{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"x","_meta":{"progressToken":"tok","other":1}},"x-ext":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(ProgressToken(m)); got != `"tok"` {
		t.Fatalf("ProgressToken = %s", got)
	}
	n := m.WithProgressToken([]byte(`"p9"`)).WithID([]byte(`17`))
	want := `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":"p9","other":1}},"x-ext":true}`
	if string(n.Raw) != want {
		t.Fatalf("got  %s\nwant %s", n.Raw, want)
	}
	c, _ := DecodeMessage([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c1","reason":"r"}}`))
	if got := string(c.WithCancelledID([]byte(`17`)).Raw); got != `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":17,"reason":"r"}}` {
		t.Fatalf("cancel: %s", got)
	}
	nop, _ := DecodeMessage([]byte(`{"jsonrpc":"2.0","method":"n"}`))
	if got := string(nop.WithParams([]byte(`{"a":1}`)).Raw); got != `{"jsonrpc":"2.0","method":"n","params":{"a":1}}` {
		t.Fatalf("no params: %s", got)
	}
}

func TestLine(t *testing.T) {
	pretty := "{\n  \"jsonrpc\": \"2.0\",\r\n  \"id\": 1,\n  \"result\": {\"s\": \"a\\nb\"}\n}\n"
	got := Line([]byte(pretty))
	if bytes.Count(got, []byte("\n")) != 1 || got[len(got)-1] != '\n' || bytes.IndexByte(got, '\r') >= 0 {
		t.Fatalf("Line = %q", got)
	}
	if !json.Valid(got) {
		t.Fatalf("Line made invalid JSON %q", got)
	}
	if got := Line([]byte(`{"a":1}`)); string(got) != "{\"a\":1}\n" {
		t.Fatalf("Line = %q", got)
	}
}

func TestPeekID(t *testing.T) {
	tests := []struct {
		in, id string
		ok     bool
	}{
		{`{"jsonrpc":"2.0","id":42,"result":{"content":[{"text":"aaaa`, `42`, true},
		{`{"jsonrpc":"2.0","id":"x\"y","res`, `"x\"y"`, true},
		{`{"jsonrpc":"2.0","result":{"content":[{"text":"aaaa`, ``, false},
		{`{"id":{"a":1}}`, ``, false},
		{`[`, ``, false},
		{``, ``, false},
	}
	for _, tt := range tests {
		id, ok := PeekID([]byte(tt.in))
		if ok != tt.ok || string(id) != tt.id {
			t.Errorf("PeekID(%s) = %s, %v", tt.in, id, ok)
		}
	}
}

// FuzzPeekID: never panics on any prefix, and on a complete message it
// finds the id the decoder finds.
func FuzzPeekID(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"id":"a`, `{"id":-1e5,"x"`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, ok := PeekID(b)
		m, err := DecodeMessage(b)
		if err != nil || m.ID == nil || string(m.ID) == "null" {
			return
		}
		if ok && !bytes.Equal(id, m.ID) && strings.Count(string(b), `"id"`) == 1 {
			t.Fatalf("PeekID = %s, decoder says %s", id, m.ID)
		}
	})
}

// FuzzSetPath: editing a member keeps the JSON valid and makes the value
// readable at the path.
func FuzzSetPath(f *testing.F) {
	for _, s := range []string{`{}`, `{"_meta":{"progressToken":1}}`, `{"a":[1,{"b":2}],"_meta":{}}`, `{"_meta":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		out, ok := SetPath(b, []byte(`"v"`), "_meta", "progressToken")
		if !ok {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("SetPath(%q) made invalid %q", b, out)
		}
		var got struct {
			Meta struct {
				Tok string `json:"progressToken"`
			} `json:"_meta"`
		}
		if err := json.Unmarshal(out, &got); err != nil || got.Meta.Tok != "v" {
			t.Fatalf("SetPath(%q) = %q: %v %q", b, out, err, got.Meta.Tok)
		}
	})
}

// FuzzLine: a message framed as a line is one line and the same JSON.
func FuzzLine(f *testing.F) {
	f.Add([]byte("{\n\"a\" : [1,\r\n2]}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		l := Line(b)
		if bytes.IndexByte(l[:len(l)-1], '\n') >= 0 || bytes.IndexByte(l, '\r') >= 0 {
			if bytes.ContainsAny(bytes.TrimSpace(b), "\n\r") {
				t.Fatalf("Line(%q) = %q", b, l)
			}
		}
		var x, y any
		if json.Unmarshal(b, &x) != nil || json.Unmarshal(l, &y) != nil {
			t.Fatalf("Line(%q) = %q not JSON", b, l)
		}
	})
}

// FuzzMember: Member finds the member encoding/json finds (the last of
// duplicates), escaped and invalid-UTF-8 names included.
func FuzzMember(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":{"c":2},"a":3}`), "a")
	f.Add([]byte(`{"\u0061":1}`), "a")
	f.Add([]byte("{\"\xff\":1}"), "\ufffd")
	f.Add([]byte(`{"ab":1,"a":2}`), "a")
	f.Fuzz(func(t *testing.T, obj []byte, key string) {
		var m map[string]json.RawMessage
		if json.Unmarshal(obj, &m) != nil {
			return
		}
		want, wantOK := m[key]
		got := RawMember(obj, key)
		if wantOK != (got != nil) || (wantOK && !bytes.Equal(bytes.TrimSpace(want), got)) {
			t.Fatalf("RawMember(%q, %q) = %q, encoding/json finds %q (%v)", obj, key, got, want, wantOK)
		}
	})
}
