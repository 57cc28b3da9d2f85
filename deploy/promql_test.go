package deploy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// promqlMetrics returns the metric names a PromQL expression selects, in
// order, each once: the identifiers that are neither a function or an
// aggregation (followed by "(", or by "by (…)" or "without (…)"), nor a keyword (and, or, bool, offset…),
// nor a label name (inside a grouping list "by (…)" or a matcher "{…}"),
// nor part of a string, a number, a range "[…]" or a Grafana variable.
// An expression whose brackets do not close is an error. It is careful
// enough for dashboards, not a PromQL parser.
func promqlMetrics(expr string) ([]string, error) {
	var names []string
	for i := 0; i < len(expr); {
		c := expr[i]
		var err error
		switch {
		case c == '"' || c == '\'' || c == '`':
			i, err = skipString(expr, i)
		case c == '{':
			i, err = skipTo(expr, i, '}')
		case c == '[':
			i, err = skipTo(expr, i, ']')
		case c == '$':
			i = skipVariable(expr, i)
		case isDigit(c) || c == '.' && i+1 < len(expr) && isDigit(expr[i+1]):
			i = skipNumber(expr, i)
		case isIdentStart(c):
			var name string
			var metric bool
			name, metric, i, err = identifier(expr, i)
			if metric && !slices.Contains(names, name) {
				names = append(names, name)
			}
		default:
			i++
		}
		if err != nil {
			return nil, err
		}
	}
	return names, nil
}

// promqlKeywords are PromQL's words that are not metric names when they
// stand alone (functions and aggregations are told by their "(").
var promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "inf", "nan"}

// groupingKeywords take a list of label names in parentheses.
var groupingKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// identifier reads the identifier at i; metric reports whether it names a
// metric. A grouping keyword's label list is read with it.
func identifier(expr string, i int) (name string, metric bool, next int, err error) {
	j := i
	for j < len(expr) && (isIdentStart(expr[j]) || isDigit(expr[j])) {
		j++
	}
	name = expr[i:j]
	k := skipSpace(expr, j)
	// A function or an aggregation is followed by "(", an aggregation
	// maybe by its grouping first: "sum by (le) (…)".
	call := k < len(expr) && expr[k] == '('
	if w := wordAt(expr, k); w == "by" || w == "without" {
		l := skipSpace(expr, k+len(w))
		call = l < len(expr) && expr[l] == '('
	}
	lower := strings.ToLower(name)
	switch {
	case slices.Contains(groupingKeywords, lower):
		if call {
			next, err = skipTo(expr, k, ')')
			return name, false, next, err
		}
		return name, false, j, nil // group_left without labels
	case slices.Contains(promqlKeywords, lower), call:
		return name, false, j, nil
	}
	return name, true, j, nil
}

// skipSpace returns the index of the first byte at or after i that is
// not white space.
func skipSpace(expr string, i int) int {
	for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n' || expr[i] == '\r') {
		i++
	}
	return i
}

// wordAt returns the identifier at i, lower-cased ("" for none).
func wordAt(expr string, i int) string {
	j := i
	for j < len(expr) && (isIdentStart(expr[j]) || j > i && isDigit(expr[j])) {
		j++
	}
	return strings.ToLower(expr[i:j])
}

// skipTo returns the index after the close that ends the bracket at i,
// strings inside skipped.
func skipTo(expr string, i int, close byte) (int, error) {
	for j := i + 1; j < len(expr); j++ {
		switch expr[j] {
		case close:
			return j + 1, nil
		case '"', '\'', '`':
			var err error
			if j, err = skipString(expr, j); err != nil {
				return 0, err
			}
			j--
		}
	}
	return 0, fmt.Errorf("%q: %q at %d is not closed", expr, expr[i], i)
}

// skipString returns the index after the string literal at i.
func skipString(expr string, i int) (int, error) {
	q := expr[i]
	for j := i + 1; j < len(expr); j++ {
		switch {
		case expr[j] == '\\' && q != '`':
			j++
		case expr[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("%q: string at %d is not closed", expr, i)
}

// skipVariable returns the index after the Grafana variable at i ($name,
// ${name}, $__rate_interval).
func skipVariable(expr string, i int) int {
	if i+1 < len(expr) && expr[i+1] == '{' {
		if j := strings.IndexByte(expr[i:], '}'); j >= 0 {
			return i + j + 1
		}
	}
	j := i + 1
	for j < len(expr) && (isIdentStart(expr[j]) || isDigit(expr[j])) {
		j++
	}
	return j
}

// skipNumber returns the index after the number (or duration) at i.
func skipNumber(expr string, i int) int {
	j := i
	for j < len(expr) && (isDigit(expr[j]) || isIdentStart(expr[j]) || expr[j] == '.' ||
		(expr[j] == '+' || expr[j] == '-') && (expr[j-1] == 'e' || expr[j-1] == 'E')) {
		j++
	}
	return j
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func TestPromQLMetrics(t *testing.T) {
	for _, tt := range []struct {
		expr string
		want []string
	}{
		{`sum by (le, upstream) (rate(spillway_mcp_request_duration_seconds_bucket[$__rate_interval]))`,
			[]string{"spillway_mcp_request_duration_seconds_bucket"}},
		{`histogram_quantile(0.95, sum(rate(a_bucket{code="2xx", le=~"0.1|inf"}[5m])) by (le))`, []string{"a_bucket"}},
		{`sum without (instance) (x_total) / on (job) group_left y_total offset 1h and bool z`, []string{"x_total", "y_total", "z"}},
		{`rate(x{name="by (le) }{ sum(\"q"}[1m:30s]) * 1e-3 + .5 - inf`, []string{"x"}},
		{`increase(spillway_offload_bytes_saved_total[$__range]) > ${threshold} or vector(0)`, []string{"spillway_offload_bytes_saved_total"}},
		{`{__name__="hidden"}`, nil},
		{`a_total + a_total unless on() b:recorded:rate5m`, []string{"a_total", "b:recorded:rate5m"}},
	} {
		got, err := promqlMetrics(tt.expr)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("promqlMetrics(%q) = %q, %v; want %q", tt.expr, got, err, tt.want)
		}
	}
	for _, bad := range []string{`rate(x[5m)`, `x{a="b}`, `sum by (le x`} {
		if got, err := promqlMetrics(bad); err == nil {
			t.Errorf("promqlMetrics(%q) = %q, want an error", bad, got)
		}
	}
}
