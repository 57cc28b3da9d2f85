package mcpproxy

import (
	"encoding/json"
	"net/http"
	"testing"
)

// Mcp-Param-* headers come from clients. Whatever a header says, the
// check does not panic and accepts only a value equal to the argument;
// and what setParamHeaders (the stdio face's client side) writes for an
// argument always passes the check for the same arguments.
func FuzzParamHeaders(f *testing.F) {
	for _, c := range [][2]string{
		{`"eu-west"`, "eu-west"}, {`" padded "`, "=?base64?IHBhZGRlZCA=?="}, {`42`, "42"}, {`true`, "true"},
		{`"=?base64?eA==?="`, "=?base64?eA==?="}, {`1e300`, "1e300"}, {`{"a":1}`, ""}, {`"é"`, "=?base64?w6k=?="},
	} {
		f.Add([]byte(c[0]), c[1])
	}
	bs := []paramBinding{{path: []string{"region"}, header: "Region"}}
	f.Fuzz(func(t *testing.T, arg []byte, header string) {
		params := []byte(`{"name":"t","arguments":{"region":` + string(arg) + `}}`)
		if !json.Valid(params) {
			return
		}
		h := http.Header{}
		setParamHeaders(h, bs, params)
		if v := h.Get("Mcp-Param-Region"); v != "" {
			if err := checkParamHeaders(h, bs, params); err != nil {
				t.Fatalf("argument %s: header %q written, then refused: %v", arg, v, err)
			}
		}

		h = http.Header{"Mcp-Param-Region": {header}}
		if checkParamHeaders(h, bs, params) != nil {
			return
		}
		var s string
		if json.Unmarshal(arg, &s) == nil {
			if v, err := decodeHeaderValue(header); err != nil || v != s {
				t.Fatalf("header %q accepted for argument %s", header, arg)
			}
		}
	})
}
