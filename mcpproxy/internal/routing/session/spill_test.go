package session

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// An event the log lets go (shed over the budget, pruned past the window)
// gives back the disk its long strings took, not at their TTL.
func TestDroppedEventsReleaseSpills(t *testing.T) {
	sp, err := spill.New(spill.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	big := func(id int) *jsonrpc.Message {
		raw, err := sp.Read(strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"t":"%s"}}`, id, strings.Repeat("x", 100000))), 0)
		if err != nil {
			t.Fatal(err)
		}
		return jsonrpc.MustDecode(string(raw))
	}
	tab := NewTable(4, 0, Limits{Budget: 500, Window: time.Minute})
	defer tab.Close()
	s, _ := tab.Create(context.Background(), "A", func(*Session) error { return nil })
	st := s.NewStream()
	st.Await([][]byte{[]byte("1"), []byte("2")})
	st.Append(big(1))
	st.Append(jsonrpc.Notification("n", map[string]string{"pad": fmt.Sprintf("%0600d", 0)})) // sheds id 1
	if n := sp.Alive(); n != 0 {
		t.Errorf("a shed response still holds %d bytes on disk", n)
	}
	st.Append(big(2))
	s.prune(time.Now().Add(time.Hour), 0)
	if n := sp.Alive(); n != 0 {
		t.Errorf("a response pruned past the window still holds %d bytes on disk", n)
	}
}
