package artifact

import (
	"errors"
	"strconv"
	"strings"
)

// byteRange is a satisfiable range [start, start+length) of a representation.
type byteRange struct{ start, length int64 }

var (
	errRangeSyntax        = errors.New("malformed Range")
	errRangeUnsatisfiable = errors.New("unsatisfiable Range")
)

// maxRanges bounds the work a single Range header can cause.
const maxRanges = 16

// parseRange parses an RFC 9110 Range header against a representation of
// size bytes. It returns the satisfiable ranges in request order. A syntax
// error means the header must be ignored (serve 200); errRangeUnsatisfiable
// means 416.
func parseRange(h string, size int64) ([]byteRange, error) {
	unit, spec, ok := strings.Cut(h, "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(unit), "bytes") {
		return nil, errRangeSyntax
	}
	var out []byteRange
	n := 0
	for part := range strings.SplitSeq(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue // RFC 9110 allows empty list elements
		}
		if n++; n > maxRanges {
			return nil, errRangeSyntax
		}
		r, ok, err := parseRangeSpec(part, size)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
		}
	}
	if n == 0 {
		return nil, errRangeSyntax
	}
	if len(out) == 0 {
		return nil, errRangeUnsatisfiable
	}
	return out, nil
}

// parseRangeSpec parses one element of a Range header's list ("a-b",
// "a-" or the suffix "-k") against a representation of size bytes. ok is
// false for a well-formed range that selects none of it; err is
// errRangeSyntax for a malformed one.
func parseRangeSpec(part string, size int64) (r byteRange, ok bool, err error) {
	first, last, found := strings.Cut(part, "-")
	if !found {
		return byteRange{}, false, errRangeSyntax
	}
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	if first == "" {
		// Suffix range: the last N bytes.
		k, ok := parseDigits(last)
		if !ok {
			return byteRange{}, false, errRangeSyntax
		}
		if k == 0 || size == 0 {
			return byteRange{}, false, nil
		}
		k = min(k, size)
		return byteRange{size - k, k}, true, nil
	}
	a, ok := parseDigits(first)
	if !ok {
		return byteRange{}, false, errRangeSyntax
	}
	b := size - 1
	if last != "" {
		if b, ok = parseDigits(last); !ok || b < a {
			return byteRange{}, false, errRangeSyntax
		}
	}
	if a >= size {
		return byteRange{}, false, nil
	}
	b = min(b, size-1)
	return byteRange{a, b - a + 1}, true, nil
}

// parseDigits accepts 1*DIGIT that fits an int64.
func parseDigits(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

func (r byteRange) contentRange(size int64) string {
	return "bytes " + strconv.FormatInt(r.start, 10) + "-" + strconv.FormatInt(r.start+r.length-1, 10) + "/" + strconv.FormatInt(size, 10)
}
