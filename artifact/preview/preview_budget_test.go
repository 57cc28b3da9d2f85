package preview

import (
	"strings"
	"testing"
)

// SetBudget before Preview gives what New with that budget gives.
func TestSetBudget(t *testing.T) {
	in := `[` + strings.Repeat(`{"id":1,"name":"a fairly long name to fill the budget","tags":["x","y"]},`, 300) + `{"id":2}]`
	for _, budget := range []int{0, 10, 300, 5000} {
		want := New(Options{Budget: budget})
		want.Write([]byte(in))
		got := New(Options{Budget: 100})
		got.Write([]byte(in))
		got.SetBudget(budget)
		if w, g := want.Preview(), got.Preview(); w.Text != g.Text {
			t.Fatalf("budget %d: %q, want %q", budget, g.Text, w.Text)
		}
	}
}
