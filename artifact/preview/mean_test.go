package preview

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A mean is printed within its own range and close to the true one at
// the range's scale. Before, git commit timestamps
// 1795345480..1795905793 had their mean printed as 1796000000: four
// significant digits, past the largest value.
func TestMeanWithinRange(t *testing.T) {
	var b strings.Builder
	stamps := []int64{1795345480}
	for i := 0; i < 9; i++ {
		stamps = append(stamps, 1795905793-int64(i))
	}
	var sum float64
	for i, s := range stamps {
		fmt.Fprintf(&b, "{\"sha\":\"%07x\",\"committed\":%d}\n", i*7919, s)
		sum += float64(s)
	}
	mean := sum / float64(len(stamps))
	pv := previewChunks(Options{MimeType: "application/x-ndjson"}, []byte(b.String()), 1<<20)
	m := regexp.MustCompile(`committed: int, (\d+)\.\.(\d+) mean (\S+),`).FindStringSubmatch(pv.Text)
	if m == nil {
		t.Fatalf("no range and mean for committed in:\n%s", pv.Text)
	}
	lo, _ := strconv.ParseFloat(m[1], 64)
	hi, _ := strconv.ParseFloat(m[2], 64)
	got, err := strconv.ParseFloat(m[3], 64)
	if err != nil || got < lo || got > hi || lo != 1795345480 || hi != 1795905793 {
		t.Fatalf("committed: %s..%s mean %s: the mean is outside its range", m[1], m[2], m[3])
	}
	if d := got - mean; d > (hi-lo)/1000 || -d > (hi-lo)/1000 {
		t.Errorf("mean printed %s, true %f: off by more than a thousandth of the range", m[3], mean)
	}

	for _, c := range []struct {
		mean, lo, hi float64
		want         string
	}{
		{mean, 1795345480, 1795905793, "1795850000"},
		{10.4016, 1, 20, "10.4"},
		{5599.5, 5000, 6199, "5600"},       // four digits are enough
		{0.999995, 0.99999, 1, "0.999995"}, // a narrow range needs more
		{1.5, 1, 2, "1.5"},
	} {
		if got := meanText(c.mean, c.lo, c.hi); got != c.want {
			t.Errorf("meanText(%v, %v, %v) = %s, want %s", c.mean, c.lo, c.hi, got, c.want)
		}
	}
}
