package s3store

import (
	"net/http"
	"strconv"
	"testing"
)

func TestDirectLength(t *testing.T) {
	for _, tc := range []struct {
		status int
		cl     int64
		te     []string
		cr     string
		offset int64
		ranged bool
		want   int64
		wantOK bool
	}{
		{200, 10, nil, "", 0, false, 10, true},
		{200, 0, nil, "", 0, false, 0, true},
		{200, -1, nil, "", 0, false, 0, false},                 // no Content-Length
		{200, 10, []string{"chunked"}, "", 0, false, 0, false}, // chunked
		{206, 10, nil, "bytes 0-9/20", 0, false, 0, false},     // not asked for
		{200, 20, nil, "", 5, true, 0, false},                  // a range ignored
		{206, 10, nil, "bytes 5-14/20", 5, true, 10, true},
		{206, 10, nil, "bytes 5-14/*", 5, true, 10, true},
		{206, 10, nil, "bytes 6-15/20", 5, true, 0, false}, // another start
		{206, 9, nil, "bytes 5-14/20", 5, true, 0, false},  // length mismatch
		{206, 10, nil, "bytes 5-14/14", 5, true, 0, false}, // past the size
		{404, 10, nil, "", 0, false, 0, false},
		{416, 0, nil, "bytes */20", 30, true, 0, false},
	} {
		res := &http.Response{StatusCode: tc.status, ContentLength: tc.cl, TransferEncoding: tc.te, Header: http.Header{}}
		if tc.cr != "" {
			res.Header.Set("Content-Range", tc.cr)
		}
		n, ok := directLength(res, tc.offset, tc.ranged)
		if n != tc.want || ok != tc.wantOK {
			t.Errorf("%d %d %v %q from %d: %d, %v; want %d, %v", tc.status, tc.cl, tc.te, tc.cr, tc.offset, n, ok, tc.want, tc.wantOK)
		}
	}
}

// FuzzContentRange: whatever a service sends, a range parseContentRange
// accepts starts at 0 or later, ends at or after its start, within the size
// when the size is given, and prints back as it was read.
func FuzzContentRange(f *testing.F) {
	for _, s := range []string{"bytes 0-9/10", "bytes 5-14/*", "bytes */20", "bytes 9-0/10", "bytes -1-5/10",
		"bytes 0-9223372036854775807/*", "bytes 0-10/10", "bytes 1-2/3/4", "bytes +1-2/3", "bytes 01-2/3", "items 0-1/2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		first, last, ok := parseContentRange(v)
		if !ok {
			return
		}
		if first < 0 || last < first {
			t.Fatalf("%q: %d-%d", v, first, last)
		}
		_, size, _ := cutLast(v)
		if size != "*" {
			sz, err := strconv.ParseInt(size, 10, 64)
			if err != nil || last >= sz {
				t.Fatalf("%q: %d-%d past the size %q", v, first, last, size)
			}
		}
	})
}

// cutLast splits a Content-Range value at its "/".
func cutLast(v string) (string, string, bool) {
	for i := len(v) - 1; i >= 0; i-- {
		if v[i] == '/' {
			return v[:i], v[i+1:], true
		}
	}
	return v, "", false
}
