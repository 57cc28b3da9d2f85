package session

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

// TestNoDeliveryLost: responses appended while writers keep taking the
// stream over are all there, once, for the last writer. Run under -race;
// 2^20 deliveries, the order of the old race (6 lost in 2 million).
func TestNoDeliveryLost(t *testing.T) {
	n := 1 << 20
	if testing.Short() {
		n = 1 << 14
	}
	tab := NewTable(1, 0, Limits{Budget: 1 << 30, Window: time.Hour})
	defer tab.Close()
	s, _ := tab.Create(context.Background(), "", func(*Session) error { return nil })
	st := s.NewStream()
	ids := make([][]byte, n)
	for i := range ids {
		ids[i] = jsonrpc.NumID(uint64(i))
	}
	st.Await(ids)
	const producers = 8
	var wg sync.WaitGroup
	for p := 0; p < producers; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += producers {
				if !st.Append(jsonrpc.Response(ids[i], []byte(`{}`))) {
					t.Errorf("response %d refused", i)
					return
				}
			}
		}()
	}
	// Writers take the stream over again and again, each reading a little.
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		cursor := 0
		for {
			select {
			case <-stop:
				return
			default:
			}
			g := st.Attach()
			b := st.Next(g, cursor)
			if len(b.Events) > 0 {
				_, cursor, _ = Seq(b.Events[len(b.Events)-1].ID)
			}
		}
	}()
	wg.Wait()
	close(stop)
	readers.Wait()
	b := st.Next(st.Attach(), 0)
	if !b.Done || b.Gap {
		t.Fatalf("done %v, gap %v", b.Done, b.Gap)
	}
	seen := make([]bool, n)
	for _, ev := range b.Events {
		m, err := jsonrpc.DecodeMessage(ev.Data)
		if err != nil {
			t.Fatal(err)
		}
		var i int
		for _, c := range m.ID {
			i = i*10 + int(c-'0')
		}
		if seen[i] {
			t.Fatalf("response %d delivered twice", i)
		}
		seen[i] = true
	}
	for i, ok := range seen {
		if !ok {
			t.Fatalf("response %d lost (of %d)", i, n)
		}
	}
}

// A session closed (its tenant's least recently used, evicted at the cap)
// while requests open streams on it: Close finishes every stream it
// holds, a stream opened after it is finished at once, and (under -race)
// Close does not read the stream map while a request writes it, as it did
// when it ranged over the map itself after unlocking.
func TestCloseWhileStreamsOpen(t *testing.T) {
	for range 200 {
		s := newSession("", Limits{Budget: 1 << 20, Window: time.Minute})
		var wg sync.WaitGroup
		opened := make([]*Stream, 4)
		for i := range opened {
			wg.Go(func() { opened[i] = s.NewStream() })
		}
		s.Close()
		wg.Wait()
		for _, st := range append(opened, s.GET()) {
			st.mu.Lock()
			done := st.done
			st.mu.Unlock()
			if !done {
				t.Fatal("a stream of a closed session is not finished")
			}
		}
	}
}
