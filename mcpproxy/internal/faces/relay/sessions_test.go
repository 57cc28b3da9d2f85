package relay

import (
	"fmt"
	"slices"
	"testing"
)

// TestQueue: the entries' intrusive queues keep arrival order through
// removals at the front, the back and the middle, each queue through its
// own links (an entry in both moves in neither when taken out of one),
// as container/list, which they replace, did. The model is a slice.
func TestQueue(t *testing.T) {
	tq, sq := queue{at: inTenant}, queue{at: inSession}
	var tm, sm []*entry
	check := func(step string) {
		t.Helper()
		for _, c := range []struct {
			name  string
			q     *queue
			model []*entry
			next  func(*entry) *entry
			prev  func(*entry) *entry
		}{
			{"tenant", &tq, tm, func(e *entry) *entry { return e.inTenant.next }, func(e *entry) *entry { return e.inTenant.prev }},
			{"session", &sq, sm, func(e *entry) *entry { return e.inSession.next }, func(e *entry) *entry { return e.inSession.prev }},
		} {
			var fwd, back []*entry
			for e := c.q.front; e != nil; e = c.next(e) {
				fwd = append(fwd, e)
			}
			for e := c.q.back; e != nil; e = c.prev(e) {
				back = append(back, e)
			}
			slices.Reverse(back)
			if !slices.Equal(fwd, c.model) || !slices.Equal(back, c.model) || c.q.n != len(c.model) {
				t.Fatalf("%s: %s queue holds %v (backwards %v, n %d), want %v", step, c.name, keys(fwd), keys(back), c.q.n, keys(c.model))
			}
		}
	}
	es := make([]*entry, 8)
	for i := range es {
		es[i] = &entry{key: fmt.Sprint(i)}
		tq.pushBack(es[i])
		tm = append(tm, es[i])
		if i%2 == 0 {
			sq.pushBack(es[i])
			sm = append(sm, es[i])
		}
	}
	check("filled")
	take := func(q *queue, model *[]*entry, e *entry) {
		q.remove(e)
		*model = slices.DeleteFunc(*model, func(x *entry) bool { return x == e })
	}
	take(&tq, &tm, es[0]) // the front, also in the session queue
	check("front")
	take(&tq, &tm, es[7]) // the back
	check("back")
	take(&sq, &sm, es[4]) // the middle of the session queue only
	check("middle")
	tq.pushBack(es[0]) // back in, at the back
	tm = append(tm, es[0])
	check("again")
	for _, e := range slices.Clone(sm) {
		take(&sq, &sm, e)
	}
	check("emptied")
	if sq.front != nil || sq.back != nil {
		t.Fatalf("an empty queue points at %v, %v", sq.front, sq.back)
	}
}

func keys(es []*entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.key)
	}
	return out
}
