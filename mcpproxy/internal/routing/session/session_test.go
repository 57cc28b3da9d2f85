package session

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

func resp(id int, body string) *jsonrpc.Message {
	return jsonrpc.Response(jsonrpc.NumID(uint64(id)), []byte(`{"x":"`+body+`"}`))
}

// TestTakeover: a writer that resumes a stream gets what the first writer
// had not sent and everything after; the first writer stops.
func TestTakeover(t *testing.T) {
	tab := NewTable(4, 0, Limits{})
	defer tab.Close()
	s, _ := tab.Create(context.Background(), "A", func(*Session) error { return nil })
	st := s.NewStream()
	st.Await([][]byte{[]byte("1"), []byte("2")})
	g1 := st.Attach()
	st.Append(jsonrpc.Notification("notifications/progress", map[string]int{"progress": 1}))
	b := st.Next(g1, 0)
	if len(b.Events) != 1 || !b.Owner || b.Done {
		t.Fatalf("first read: %+v", b)
	}
	_, cursor, _ := Seq(b.Events[0].ID)
	// The connection dies; a response arrives while nobody writes.
	st.Append(resp(1, "a"))
	g2 := st.Attach()
	if st.Next(g1, cursor).Owner {
		t.Fatal("the first writer still owns the stream after a takeover")
	}
	b = st.Next(g2, cursor)
	if len(b.Events) != 1 || b.Gap || b.Done {
		t.Fatalf("resumed read: %+v", b)
	}
	_, cursor, _ = Seq(b.Events[0].ID)
	st.Append(resp(2, "b"))
	b = st.Next(g2, cursor)
	if len(b.Events) != 1 || !b.Done {
		t.Fatalf("last read: %+v", b)
	}
	if st.Append(jsonrpc.Notification("late", nil)) {
		t.Fatal("a finished stream took another message")
	}
}

// TestCancel: a request the client cancelled is settled on the stream
// awaiting it, which ends when it awaits nothing else, and its late
// response is dropped instead of reaching another stream.
func TestCancel(t *testing.T) {
	tab := NewTable(4, 0, Limits{})
	defer tab.Close()
	s, _ := tab.Create(context.Background(), "A", func(*Session) error { return nil })
	st := s.NewStream()
	st.Await([][]byte{[]byte("1"), []byte("2")})
	// Another tenant's session, awaiting the same id: a cancel is its
	// own session's only.
	other, _ := tab.Create(context.Background(), "B", func(*Session) error { return nil })
	ost := other.NewStream()
	ost.Await([][]byte{[]byte("1")})
	s.Cancel([]byte("1"))
	if ost.Unanswered() != 1 || !ost.Append(resp(1, "theirs")) || ost.Unanswered() != 0 {
		t.Fatal("a cancel in one session settled another session's request of the same id")
	}
	g := st.Attach()
	if b := st.Next(g, 0); b.Done {
		t.Fatalf("done while request 2 waits: %+v", b)
	}
	if !st.Append(resp(1, "late")) {
		t.Fatal("the cancelled request's late response was refused: it would go to another stream")
	}
	s.Cancel([]byte("2"))
	if b := st.Next(g, 0); !b.Done || len(b.Events) != 0 {
		t.Fatalf("after both were cancelled: %+v", b)
	}
	if s.Current() != s.GET() {
		t.Fatal("server messages still go to the ended stream")
	}
}

// TestGapReported: over budget, a response nobody read becomes an error
// response for its id and the resuming writer is told of the gap.
func TestGapReported(t *testing.T) {
	tab := NewTable(4, 0, Limits{Budget: 500})
	defer tab.Close()
	s, _ := tab.Create(context.Background(), "A", func(*Session) error { return nil })
	st := s.NewStream()
	st.Await([][]byte{[]byte("1"), []byte("2"), []byte("3")})
	st.Append(jsonrpc.Notification("n", map[string]string{"pad": fmt.Sprintf("%0600d", 0)}))
	st.Append(resp(1, fmt.Sprintf("%0600d", 1)))
	st.Append(resp(2, "small"))
	if s.Held() > 500 {
		t.Fatalf("session holds %d bytes, budget 500", s.Held())
	}
	g := st.Attach()
	b := st.Next(g, 0)
	if !b.Gap {
		t.Fatal("no gap reported")
	}
	var codes []int
	for _, ev := range b.Events {
		m, err := jsonrpc.DecodeMessage(ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, m.ErrorCode())
	}
	if len(codes) != 2 || codes[0] != jsonrpc.CodeInternalError || codes[1] != 0 {
		t.Fatalf("events after shedding: %v", codes)
	}
}

// TestTableCapIsAtomic: concurrent creates never exceed the cap, and one
// tenant's pressure never closes another tenant's session.
func TestTableCapIsAtomic(t *testing.T) {
	tab := NewTable(2, 0, Limits{})
	defer tab.Close()
	other, err := tab.Create(context.Background(), "B", func(*Session) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	var live, peak atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := tab.Create(context.Background(), "A", func(s *Session) error {
				n := live.Add(1)
				s.OnClose(func() { live.Add(-1) })
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(5 * time.Millisecond)
				return nil
			})
			if err != nil && !errors.Is(err, ErrFull) {
				t.Error(err)
			}
			_ = s
		}()
	}
	wg.Wait()
	if p := peak.Load(); p > 1 {
		t.Fatalf("%d of tenant A's sessions were live at once with a cap of 2 and B holding one", p)
	}
	if other.Closed() {
		t.Fatal("tenant A's pressure closed tenant B's session")
	}
	if _, err := tab.Get(other.ID, "A"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tenant A got B's session: %v", err)
	}
}

// TestSheddingIsCheap: an upstream flooding a session nobody reads makes
// every append shed the oldest event; shedding must not copy the stream
// (it did: 40,000 appends of 4 KiB took 44 s, the session's worker fell
// behind and its inbox lost messages). Measured in bytes allocated, not
// time: at most a few KiB an append, however long the stream.
func TestSheddingIsCheap(t *testing.T) {
	tab := NewTable(4, 0, Limits{Budget: 16 << 20})
	defer tab.Close()
	s, _ := tab.Create(context.Background(), "A", func(*Session) error { return nil })
	st := s.NewStream()
	n := jsonrpc.Notification("notifications/progress", map[string]string{"m": strings.Repeat("x", 1<<10)})
	for i := 0; i < 16<<10; i++ { // 16 MiB: the budget is full
		st.Append(n)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const appends = 2000
	for i := 0; i < appends; i++ {
		st.Append(n)
	}
	runtime.ReadMemStats(&after)
	per := (after.TotalAlloc - before.TotalAlloc) / appends
	t.Logf("%d bytes allocated an append over budget", per)
	if per > 4<<10 {
		t.Fatalf("an append over budget allocates %d bytes (the stream holds %d events)", per, 16<<10)
	}
}
