package artifact

import (
	"errors"
	"testing"
)

func TestParseRange(t *testing.T) {
	tests := []struct {
		h    string
		size int64
		want []byteRange
		err  error
	}{
		{"bytes=0-9", 100, []byteRange{{0, 10}}, nil},
		{"bytes=90-", 100, []byteRange{{90, 10}}, nil},
		{"bytes=-5", 100, []byteRange{{95, 5}}, nil},
		{"bytes=-500", 100, []byteRange{{0, 100}}, nil},
		{"bytes=50-500", 100, []byteRange{{50, 50}}, nil},
		{"bytes=0-0,-1", 100, []byteRange{{0, 1}, {99, 1}}, nil},
		{"BYTES = 1-2", 100, []byteRange{{1, 2}}, nil},
		{"bytes=100-", 100, nil, errRangeUnsatisfiable},
		{"bytes=-0", 100, nil, errRangeUnsatisfiable},
		{"bytes=0-", 0, nil, errRangeUnsatisfiable},
		{"bytes=5-1", 100, nil, errRangeSyntax},
		{"bytes=a-b", 100, nil, errRangeSyntax},
		{"bytes=+1-2", 100, nil, errRangeSyntax},
		{"items=0-1", 100, nil, errRangeSyntax},
		{"bytes=", 100, nil, errRangeSyntax},
		{"bytes=1", 100, nil, errRangeSyntax},
		{"bytes=99999999999999999999-", 100, nil, errRangeSyntax},
	}
	for _, tt := range tests {
		got, err := parseRange(tt.h, tt.size)
		if !errors.Is(err, tt.err) || (tt.err == nil && err != nil) {
			t.Errorf("parseRange(%q) err = %v, want %v", tt.h, err, tt.err)
			continue
		}
		if len(got) != len(tt.want) {
			t.Errorf("parseRange(%q) = %v, want %v", tt.h, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("parseRange(%q) = %v, want %v", tt.h, got, tt.want)
			}
		}
	}
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"bytes=0-9", "bytes=-5", "bytes=1-,2-3", "bytes= 7 - 8 ", "x"} {
		f.Add(s, int64(100))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			return
		}
		rs, err := parseRange(h, size)
		if err != nil {
			return
		}
		for _, r := range rs {
			if r.start < 0 || r.length <= 0 || r.start+r.length > size {
				t.Fatalf("parseRange(%q, %d) gave out-of-bounds %+v", h, size, r)
			}
		}
	})
}
