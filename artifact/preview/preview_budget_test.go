package preview

import (
	"strings"
	"testing"
)

// SetBudget before Preview gives what New with that budget gives.
func TestSetBudget(t *testing.T) {
	in := `[` + strings.Repeat(`{"id":1,"name":"a fairly long name to fill the budget","tags":["x","y"]},`, 300) + `{"id":2}]`
	small, large := New(Options{Budget: 300}), New(Options{Budget: 5000})
	small.Write([]byte(in))
	large.Write([]byte(in))
	if small.Preview().Text == large.Preview().Text {
		t.Fatal("the document's preview does not depend on the budget: the test shows nothing")
	}
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
