package jsonrpc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		in      string
		batch   bool
		n       int
		wantErr string
	}{
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, n: 1},
		{in: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, n: 1},
		{in: `{"jsonrpc":"2.0","id":"a","result":{"x":[1,2,{"y":"}"}]}}`, n: 1},
		{in: `[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","method":"b"}]`, batch: true, n: 2},
		{in: `{"jsonrpc":"2.0","id":1,"method":"a"`, wantErr: "malformed"},
		{in: `[]`, wantErr: "empty batch"},
		{in: `"x"`, wantErr: "JSON object"},
		{in: `{"jsonrpc":"1.0","id":1,"method":"a"}`, wantErr: `"2.0"`},
		{in: `{"jsonrpc":"2.0","id":{},"method":"a"}`, wantErr: "id must be"},
		{in: `{"jsonrpc":"2.0","id":1,"method":"a","result":1}`, wantErr: "either"},
		{in: `{"jsonrpc":"2.0","id":1}`, wantErr: "needs a method"},
		{in: `{"jsonrpc":"2.0","result":{}}`, wantErr: "needs an id"},
		{in: `{"jsonrpc":"2.0","id":1,"method":"a","params":3}`, wantErr: "params"},
		{in: `{"jsonrpc":"2.0","id":1,"method":"a","params":"x"}`, wantErr: "params"},
		{in: `{"jsonrpc":"2.0","id":1,"method":"a","params":false}`, wantErr: "params"},
		{in: `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}`, n: 1},
		{in: `{"jsonrpc":"2.0","method":"notifications/initialized","params":null}`, n: 1},
		{in: `[{"jsonrpc":"2.0","id":1,"method":"a","params":null},{"jsonrpc":"2.0","method":"b","params" : null }]`, batch: true, n: 2},
	}
	for _, tt := range tests {
		msgs, batch, err := Decode([]byte(tt.in))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Decode(%s) error %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || batch != tt.batch || len(msgs) != tt.n {
			t.Errorf("Decode(%s) = %d msgs, batch %v, %v", tt.in, len(msgs), batch, err)
		}
	}
}

func TestWithResultKeepsTheRest(t *testing.T) {
	in := `{"jsonrpc":"2.0","x-extra":{"a":1},"id":7,"result":{"big":"` + strings.Repeat("z", 100) + `"},"z":null}`
	m, err := DecodeMessage([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	n := m.WithResult([]byte(`{"small":1}`))
	want := `{"jsonrpc":"2.0","x-extra":{"a":1},"id":7,"result":{"small":1},"z":null}`
	if string(n.Raw) != want {
		t.Errorf("got %s\nwant %s", n.Raw, want)
	}
	r := m.WithID([]byte(`"up-1"`))
	if !bytes.Contains(r.Raw, []byte(`"id":"up-1"`)) || string(r.ID) != `"up-1"` {
		t.Errorf("withID: %s", r.Raw)
	}
}

// FuzzDecode: the envelope decoder never panics, accepts only valid JSON,
// and the spans it returns are the values encoding/json sees.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
		`{"jsonrpc":"2.0","id":"\u0031","result":{"content":[]}}`,
		`[{"jsonrpc":"2.0","method":"n"}]`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`,
		`{"\u006aSONrpc":"2.0"}`, `[`, `{}`, ` [ ] `,
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`,
		`{"jsonrpc":"2.0","method":"n","params":{"a":1},"params":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, _, err := Decode(b)
		if err != nil {
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		for _, m := range msgs {
			var env struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
				Result json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal(m.Raw, &env); err != nil {
				t.Fatalf("message %q: %v", m.Raw, err)
			}
			if m.HasMethod() && env.Method != m.Method {
				t.Fatalf("method %q, encoding/json says %q", m.Method, env.Method)
			}
			if m.Result != nil {
				if !bytes.Equal(m.Result, env.Result) {
					t.Fatalf("result %q, encoding/json says %q", m.Result, env.Result)
				}
				n := m.WithResult([]byte(`{}`))
				if !json.Valid(n.Raw) {
					t.Fatalf("WithResult made %q", n.Raw)
				}
			}
		}
	})
}

// "params": null is params absent (JSON-RPC lets them be omitted): the
// message is a request or a notification without params, and setting its
// params replaces the null.
func TestNullParams(t *testing.T) {
	m, err := DecodeMessage([]byte(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if !m.IsRequest() || m.Params != nil || m.Method != "tools/list" {
		t.Fatalf("request %+v", m)
	}
	if tok := ProgressToken(m); tok != nil || MetaString(m, MetaProtocolVersion) != "" {
		t.Errorf("null params have members: %s", tok)
	}
	n := m.WithParams([]byte(`{"cursor":"2"}`))
	if want := `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{"cursor":"2"}}`; string(n.Raw) != want {
		t.Errorf("WithParams = %s, want %s", n.Raw, want)
	}
	if string(n.Params) != `{"cursor":"2"}` {
		t.Errorf("params %s", n.Params)
	}
	if m.WithProgressToken([]byte(`"p1"`)) != m {
		t.Error("a progress token was set in params that are absent")
	}
	nt, err := DecodeMessage([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized","params":null}`))
	if err != nil || !nt.IsNotification() || nt.Params != nil {
		t.Errorf("notification: %+v, %v", nt, err)
	}
}
