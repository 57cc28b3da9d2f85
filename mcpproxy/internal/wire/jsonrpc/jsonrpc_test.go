package jsonrpc

import (
	"bytes"
	"encoding/json"
	"math/big"
	"reflect"
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
		`{"jsonrpc":"2.0","id":1.0,"method":"ping","params":null}`,
		`{"jsonrpc":"2.0","method":"n","params":{"a":1},"params":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		msgs, batch, err := Decode(b)
		checkDecodeMessage(t, b, msgs, batch, err)
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

// checkDecodeMessage: DecodeMessage (which skips Decode's slice for one
// message) answers as Decode does: Decode's message when b is one, an
// error when b is a batch or not a message, the same error when Decode
// fails on what is not a batch.
func checkDecodeMessage(t *testing.T, b []byte, msgs []*Message, batch bool, err error) {
	t.Helper()
	m, merr := DecodeMessage(b)
	switch {
	case err == nil && !batch:
		if merr != nil || !reflect.DeepEqual(m, msgs[0]) {
			t.Fatalf("DecodeMessage(%q) = %+v, %v; Decode: %+v", b, m, merr, msgs[0])
		}
	case merr == nil:
		t.Fatalf("DecodeMessage(%q) accepted what Decode did not take as one message (%v, batch %v)", b, err, batch)
	case err != nil && !batch && merr.Error() != err.Error():
		t.Fatalf("DecodeMessage(%q): %v; Decode: %v", b, merr, err)
	}
}

// TestDecodeMessage: DecodeMessage and Decode agree on a message, a batch,
// an empty batch, an invalid message and invalid JSON.
func TestDecodeMessage(t *testing.T) {
	for _, s := range []string{` {"jsonrpc":"2.0","id":1,"method":"m","params":{"a":[1]}} `, `[{"jsonrpc":"2.0","method":"n"}]`,
		`[]`, `{"jsonrpc":"1.0","id":1,"method":"m"}`, `{"jsonrpc":"2.0","id":1,"method":"m"`, `"x"`, ``} {
		msgs, batch, err := Decode([]byte(s))
		checkDecodeMessage(t, []byte(s), msgs, batch, err)
	}
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

// Ids a peer takes for the same are one key (a JavaScript server answers
// 1.0 with 1), exactly: never by way of floating point, and a string is
// never a number.
func TestKey(t *testing.T) {
	same := [][]string{
		{`1`, `1.0`, `1.000`, `10e-1`, `1E0`, `0.1e1`, `100e-2`, ` 1 `},
		{`100`, `1e2`, `1E+2`, `100.0`, `0.001e5`},
		{`0`, `-0`, `0.0`, `0e9`, `-0.0e-3`},
		{`-15`, `-1.5e1`, `-150e-1`},
		{`"a"`, `"\u0061"`},
		{`"1"`, `"\u0031"`},
		{`null`},
	}
	for i, group := range same {
		for _, id := range group {
			if Key([]byte(id)) != Key([]byte(group[0])) {
				t.Errorf("Key(%s) = %q, Key(%s) = %q: one id", id, Key([]byte(id)), group[0], Key([]byte(group[0])))
			}
		}
		for j, other := range same {
			if j != i && Key([]byte(other[0])) == Key([]byte(group[0])) {
				t.Errorf("Key(%s) == Key(%s): different ids", other[0], group[0])
			}
		}
	}
	for _, pair := range [][2]string{
		{`9007199254740993`, `9007199254740992`}, // equal as float64
		{`1`, `"1"`}, {`1.5`, `15`}, {`-1`, `1`}, {`null`, `"null"`}, {`1e400`, `1e401`},
		{`"a"`, `"a\u0000"`}, {`01`, `1`}, {`1.`, `1`}, {`"a`, `""`},
	} {
		if Key([]byte(pair[0])) == Key([]byte(pair[1])) {
			t.Errorf("Key(%s) == Key(%s) = %q", pair[0], pair[1], Key([]byte(pair[0])))
		}
	}
}

// The ids a peer may write with other bytes when it decodes and encodes
// them again: the proxy answers those with the client's own bytes.
func TestRespellable(t *testing.T) {
	for id, want := range map[string]bool{
		`1.0`: true, `1e0`: true, `1E2`: true, `-0`: true, `"\u0061"`: true, `"a\"b"`: true,
		`1`: false, `-1`: false, `0`: false, `"a"`: false, `"é"`: false, `null`: false, ``: false,
	} {
		if got := Respellable([]byte(id)); got != want {
			t.Errorf("Respellable(%s) = %v, want %v", id, got, want)
		}
	}
}

// TestKeyAllocs: Key runs on every request and response a relay passes;
// a number id's key (the common id) costs one allocation, the string
// (before: two, its digits copied once more than the string).
func TestKeyAllocs(t *testing.T) {
	for _, id := range []string{"7", "12345", "-1.50e3"} {
		b := []byte(id)
		if n := testing.AllocsPerRun(100, func() { Key(b) }); n > 1 {
			t.Errorf("Key(%s): %v allocations, want at most 1", id, n)
		}
	}
}

// FuzzKey: ids come from clients and upstreams. Key never panics; two
// numbers share a key exactly when their values are equal, two strings
// exactly when they decode to the same text, and a number never shares
// one with a string.
func FuzzKey(f *testing.F) {
	for _, c := range [][2]string{{`1`, `1.0`}, {`10e-1`, `1`}, {`-0`, `0`}, {`"a"`, `"\u0061"`}, {`1`, `"1"`},
		{`9007199254740993`, `9007199254740992`}, {`null`, `null`}, {`1e400`, `1e400`}, {`100`, `1e2`},
		{`1e99999999999999999999`, `1e99999999999999999999`}, {`-`, `"`}, {`"\ud800"`, `"\ufffd"`}} {
		f.Add([]byte(c[0]), []byte(c[1]))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ka, kb := Key(a), Key(b)
		va, oka := idValue(a)
		vb, okb := idValue(b)
		if !oka || !okb {
			return
		}
		if same := va == vb; same != (ka == kb) {
			t.Fatalf("%s (%s) and %s (%s): same value %v, keys %q and %q", a, va, b, vb, same, ka, kb)
		}
	})
}

// idValue is an id's meaning as encoding/json and math/big see it: "s"
// and the decoded string, or "n" and the exact rational value. ok is false
// for anything else, and for a number with a long exponent (too costly
// for big.Rat).
func idValue(b []byte) (v string, ok bool) {
	if !json.Valid(b) {
		return "", false
	}
	var x any
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if d.Decode(&x) != nil {
		return "", false
	}
	switch x := x.(type) {
	case string:
		return "s" + x, true
	case json.Number:
		if i := strings.IndexAny(string(x), "eE"); i >= 0 && len(x)-i > 5 {
			return "", false
		}
		r, ok := new(big.Rat).SetString(string(x))
		if !ok {
			return "", false
		}
		return "n" + r.String(), true
	}
	return "", false
}
