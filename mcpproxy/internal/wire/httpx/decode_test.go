package httpx

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// DecodePOST answers what may not pass on with 400 and a JSON-RPC error
// whose id is null, and lets notifications, responses and (where the
// revision has them) batches through.
func TestDecodePOST(t *testing.T) {
	const meta = `"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`
	tests := []struct {
		name, header, body string
		negotiated         string // by the POST's session
		code               int    // 0: passes
	}{
		{"a request with id null", "2025-11-25", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, "", -32600},
		{"a notification with id null is a request", "2025-11-25", `{"jsonrpc":"2.0","id":null,"method":"notifications/cancelled"}`, "", -32600},
		{"id null in a 2025-03-26 batch", "", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":null,"method":"ping"}]`, "", -32600},
		{"an id that is an object", "2025-11-25", `{"jsonrpc":"2.0","id":{"n":1},"method":"ping"}`, "", -32600},
		{"an id that is an array", "2025-11-25", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, "", -32600},
		{"an id that is false", "2025-11-25", `{"jsonrpc":"2.0","id":false,"method":"ping"}`, "", -32600},
		{"not JSON", "2025-11-25", `ping, please`, "", -32700},
		{"cut JSON", "2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"pi`, "", -32700},
		{"a batch in 2025-06-18", "2025-06-18", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "", -32600},
		{"a batch of notifications in 2025-11-25", "2025-11-25", `[{"jsonrpc":"2.0","method":"notifications/initialized"}]`, "", -32600},
		{"a stateless batch named by its _meta alone", "", `[{"jsonrpc":"2.0","id":1,"method":"ping",` + meta + `}]`, "", -32600},
		{"a batch holding an initialize for 2025-11-25", "", `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}]`, "", -32600},
		{"a batch in 2025-03-26", "2025-03-26", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"}]`, "", 0},
		{"a batch without a header", "", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "", 0},
		{"a batch without a header in a 2025-03-26 session", "", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "2025-03-26", 0},
		{"a batch without a header in a 2025-11-25 session", "", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, "2025-11-25", -32600},
		{"a request", "2025-11-25", `{"jsonrpc":"2.0","id":0,"method":"ping"}`, "", 0},
		{"a notification", "2025-11-25", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", 0},
		{"a response", "2025-11-25", `{"jsonrpc":"2.0","id":"s1","result":{}}`, "", 0},
		{"an error response with id null", "2025-11-25", `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tt.body))
			if tt.header != "" {
				r.Header.Set("Mcp-Protocol-Version", tt.header)
			}
			rec := httptest.NewRecorder()
			_, _, ok := DecodePOST(rec, r, []byte(tt.body), tt.negotiated)
			if tt.code == 0 {
				if !ok {
					t.Fatalf("refused: %d %s", rec.Code, rec.Body)
				}
				return
			}
			var e struct {
				ID    json.RawMessage
				Error struct{ Code int }
			}
			json.Unmarshal(rec.Body.Bytes(), &e)
			if ok || rec.Code != http.StatusBadRequest || e.Error.Code != tt.code || string(e.ID) != "null" ||
				rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("ok %v, %d %s %s; want 400 and a %d error with id null", ok, rec.Code, rec.Header().Get("Content-Type"), rec.Body, tt.code)
			}
		})
	}
}

// FuzzDecodePOST: whatever a client posts, DecodePOST either passes
// messages none of which is a request with id null, and a batch only
// where the revision has batches, or answers 400 with one JSON-RPC error
// whose id is null: -32700 exactly when the body is not JSON.
func FuzzDecodePOST(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":{},"method":"ping"}`, `{"jsonrpc":"2.0","method":"n"}`, `{"jsonrpc":"2.0","id":1,"result":{}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}]`, `nul`,
		`[{"jsonrpc":"2.0","id":1,"method":"m","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}]`} {
		f.Add(s, "", "")
		f.Add(s, "2025-03-26", "2025-11-25")
	}
	f.Fuzz(func(t *testing.T, body, header, negotiated string) {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		if header != "" && !strings.ContainsAny(header, "\r\n\x00") {
			r.Header.Set("Mcp-Protocol-Version", header)
		}
		rec := httptest.NewRecorder()
		msgs, batch, ok := DecodePOST(rec, r, []byte(body), negotiated)
		if ok {
			for _, m := range msgs {
				if m.IsRequest() && string(m.ID) == "null" {
					t.Fatalf("passed a request with id null: %q", body)
				}
			}
			if v := batchVersion(r, msgs, negotiated); batch && v >= Version20250618 {
				t.Fatalf("passed a batch in %s: %q", v, body)
			}
			return
		}
		var e struct {
			ID    json.RawMessage
			Error struct{ Code int }
		}
		if rec.Code != http.StatusBadRequest || json.Unmarshal(rec.Body.Bytes(), &e) != nil || string(e.ID) != "null" {
			t.Fatalf("%q refused with %d %s", body, rec.Code, rec.Body)
		}
		if notJSON := !json.Valid([]byte(body)); notJSON != (e.Error.Code == -32700) || !notJSON && e.Error.Code != -32600 {
			t.Fatalf("%q refused with %d; json.Valid says %v", body, e.Error.Code, !notJSON)
		}
	})
}
