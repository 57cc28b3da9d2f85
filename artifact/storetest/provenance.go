package storetest

import (
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
)

// maxCall is a Call with every field at its bound, the request id a JSON
// string (its quotes are the only bytes a store may need to escape).
func maxCall() artifact.Call {
	return artifact.Call{
		Upstream:  strings.Repeat("u:", 20),
		Tool:      strings.Repeat("T", 64),
		RequestID: `"` + strings.Repeat("r", 30) + `"`,
		Session:   strings.Repeat("s", 32),
		TraceID:   "4bf92f3577b34da6a3ce929d0e0e4736",
		SpanID:    "00f067aa0ba902b7",
	}
}

// testProvenance checks that the call that produced an artifact comes
// back from Stat as it was put, also beside every other field at its
// limit, and that an artifact put without one has none.
func testProvenance(t *testing.T, s artifact.Store) {
	meta := newMeta()
	meta.Call = artifact.Call{Upstream: "bigtool", Tool: "big_json", RequestID: "7", Session: "abc"}
	a := mustPut(t, s, meta, []byte("provenance"))
	st, err := s.Stat(t.Context(), meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameMeta(t, "Stat", st, a)
	if st.Call != meta.Call {
		t.Errorf("call: got %+v, want %+v", st.Call, meta.Call)
	}

	full := newMeta()
	full.Name = strings.Repeat("é", 127) + "\n"
	full.Tenant = strings.Repeat("\x01", 64) + strings.Repeat("€", 21) + "x"
	full.Source = strings.Repeat("%\"\\<>&+ ", 16)
	full.Call = maxCall()
	mustPut(t, s, full, []byte("limits"))
	if st, err := s.Stat(t.Context(), full.ID); err != nil || st.Call != full.Call || st.Name != full.Name {
		t.Errorf("metadata at every limit: got %+v, %v; want call %+v", st, err, full.Call)
	}

	none := mustPut(t, s, newMeta(), []byte("no call"))
	if st, err := s.Stat(t.Context(), none.ID); err != nil || st.Call != (artifact.Call{}) {
		t.Errorf("an artifact put without a call: got %+v, %v", st.Call, err)
	}

	bad := newMeta()
	bad.Call = artifact.Call{Tool: "has space"}
	if _, err := s.Put(t.Context(), bad, strings.NewReader("x")); err == nil {
		t.Error("a call outside its bounds was stored")
	}
}
