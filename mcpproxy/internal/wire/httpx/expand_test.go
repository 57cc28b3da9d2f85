package httpx

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// A JSON reply carries the upstream's bytes, its spilled strings put back:
// one message or a batch.
func TestRepliesExpandMarkers(t *testing.T) {
	s, err := spill.New(spill.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	orig := `{"result":{"content":[{"type":"text","text":"` + strings.Repeat("x", 100000) + `"}]},"jsonrpc":"2.0","id":1}`
	raw, err := s.Read(strings.NewReader(orig), 0)
	if err != nil || !spill.HasMarkers(raw) {
		t.Fatalf("Read = %.100s, %v", raw, err)
	}
	rec := httptest.NewRecorder()
	WriteReply(rec, "", jsonrpc.MustDecode(string(raw)))
	if rec.Body.String() != orig {
		t.Errorf("WriteReply wrote %.100q…", rec.Body.String())
	}
	if s.Alive() != 0 {
		t.Errorf("a reply written for good still holds %d bytes on disk", s.Alive())
	}
	if raw, err = s.Read(strings.NewReader(orig), 0); err != nil {
		t.Fatal(err)
	}
	rec = httptest.NewRecorder()
	WriteMessages(rec, [][]byte{raw, []byte(`{"jsonrpc":"2.0","id":2,"result":{}}`)}, true)
	if want := "[" + orig + `,{"jsonrpc":"2.0","id":2,"result":{}}]`; rec.Body.String() != want {
		t.Errorf("WriteMessages wrote %.100q…", rec.Body.String())
	}
	if s.Alive() != 0 {
		t.Errorf("a batch written for good still holds %d bytes on disk", s.Alive())
	}
}

// A client's POST naming a spilled string is refused.
func TestDecodePOSTRefusesMarkers(t *testing.T) {
	rec := httptest.NewRecorder()
	body := `{"jsonrpc":"2.0","id":"\u0000spillway:00112233445566778899aabbccddeeff","method":"ping"}`
	if _, _, ok := DecodePOST(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil), []byte(body), ""); ok || rec.Code != 400 || !strings.Contains(rec.Body.String(), "reserved") {
		t.Fatalf("DecodePOST: ok %v, %d %s", ok, rec.Code, rec.Body.String())
	}
}
