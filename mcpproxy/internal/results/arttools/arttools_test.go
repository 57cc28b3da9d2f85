package arttools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var ctx = context.Background()

// source serves data as an artifact (Source is the package's own
// interface to the store; package ownmethods' tests use the real one).
func source(data []byte) Source {
	return Source{URI: "spillway://artifacts/x", Size: int64(len(data)),
		Open: func(_ context.Context, off, n int64) (io.ReadCloser, error) {
			if n < 0 {
				n = int64(len(data)) - off
			}
			return io.NopCloser(bytes.NewReader(data[off : off+n])), nil
		}}
}

const testURI = `"uri":"spillway://artifacts/abcdefghijklmnopqrstuvwxyz234567"`

// run parses args for tool and runs it over data.
func run(t *testing.T, r *Runner, tool, args string, data []byte) (string, error) {
	t.Helper()
	if args != "" {
		args = "," + args
	}
	c, err := Parse(tool, []byte(`{`+testURI+args+`}`))
	if err != nil {
		return "", err
	}
	return r.Run(ctx, c, source(data))
}

func mustRun(t *testing.T, r *Runner, tool, args string, data []byte) (head, body string) {
	t.Helper()
	out, err := run(t, r, tool, args, data)
	if err != nil {
		t.Fatalf("%s %s: %v", tool, args, err)
	}
	head, body, _ = strings.Cut(out, "\n")
	return head, body
}

// logLines is an application log with CRLF endings, non-ASCII text and
// one long line, line i (1-based) at index i-1.
func logLines() []string {
	var ls []string
	for i := 1; i <= 500; i++ {
		lvl := []string{"INFO", "WARN", "ERROR", "DEBUG"}[i%4]
		ls = append(ls, fmt.Sprintf("2025-03-%02dT10:%02d:00Z %s request %d from Zürich took %dms", i%28+1, i%60, lvl, i, i*13%997))
	}
	ls[99] = strings.Repeat("x", 20000)
	return ls
}

func TestReadLines(t *testing.T) {
	ls := logLines()
	data := []byte(strings.Join(ls, "\r\n") + "\r\n")
	r := New(Limits{})
	want := func(from, to int) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			s := ls[i-1]
			if len(s) > maxLine {
				start := 0
				for _, l := range ls[:i-1] {
					start += len(l) + 2
				}
				s = s[:maxLine] + fmt.Sprintf(" … [line cut: %d bytes; read the rest by bytes from byteOffset=%d]", len(ls[i-1]), start+maxLine)
			}
			fmt.Fprintf(&b, "%6d\t%s\n", i, s)
		}
		return b.String()
	}
	for _, tc := range []struct {
		args     string
		from, to int
		head     string
	}{
		{`"limit":3`, 1, 3, "spillway://artifacts/x lines 1-3 (more follow: offset=4)"},
		{`"offset":98,"limit":4`, 98, 101, "spillway://artifacts/x lines 98-101 (more follow: offset=102)"},
		{`"offset":495,"limit":100`, 495, 500, "spillway://artifacts/x lines 495-500 of 500 (end)"},
		{`"offset":500,"limit":1`, 500, 500, "spillway://artifacts/x lines 500-500 of 500 (end)"},
		{``, 1, 200, "spillway://artifacts/x lines 1-200 (more follow: offset=201)"},
	} {
		head, body := mustRun(t, r, Read, tc.args, data)
		if head != tc.head {
			t.Errorf("%s: head %q, want %q", tc.args, head, tc.head)
		}
		if w := want(tc.from, tc.to); body != w {
			i := 0
			for i < len(body) && i < len(w) && body[i] == w[i] {
				i++
			}
			t.Errorf("%s: differs at byte %d: got %q, want %q", tc.args, i, body[max(0, i-20):min(len(body), i+120)], w[max(0, i-20):min(len(w), i+120)])
		}
	}
	if _, err := run(t, r, Read, `"offset":502`, data); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "the artifact has 500 lines") {
		t.Errorf("past the end: %v", err)
	}
	// No final newline: the last line is a line.
	head, body := mustRun(t, r, Read, `"offset":2`, []byte("a\r\nb\r\nc"))
	if head != "spillway://artifacts/x lines 2-3 of 3 (end)" || body != "     2\tb\n     3\tc\n" {
		t.Errorf("no final newline: %q %q", head, body)
	}
}

// runeWindowIn is the window of s from off, n bytes long, cut to whole
// characters, computed from the characters' positions.
func runeWindowIn(s string, off, n int) (lo, hi int) {
	lo, hi = -1, off
	for i, c := range s {
		end := i + utf8.RuneLen(c)
		if i >= off && lo < 0 {
			lo = i
		}
		if i >= off && end <= off+n {
			hi = end
		}
	}
	if lo < 0 || lo > off+n {
		lo = min(off+n, len(s)) // no character starts in the window
	}
	return lo, max(hi, lo)
}

func TestReadBytesUTF8(t *testing.T) {
	text := strings.Repeat("héllo wörld € 𝄞 — ", 40)
	data := []byte(text)
	r := New(Limits{})
	for off := 0; off < 60; off++ {
		for _, n := range []int{1, 2, 3, 5, 17, 64} {
			head, body := mustRun(t, r, Read, fmt.Sprintf(`"byteOffset":%d,"byteLength":%d`, off, n), data)
			lo, hi := runeWindowIn(text, off, n)
			if body != text[lo:hi] {
				t.Fatalf("off %d n %d: %q, want %q", off, n, body, text[lo:hi])
			}
			if !strings.HasPrefix(head, fmt.Sprintf("spillway://artifacts/x bytes %d-%d of %d (%d bytes of UTF-8 text; next: byteOffset=%d)", lo, hi, len(data), hi-lo, hi)) {
				t.Fatalf("off %d n %d: head %q, want range %d-%d", off, n, head, lo, hi)
			}
		}
	}
	// The last bytes: no "next".
	head, body := mustRun(t, r, Read, fmt.Sprintf(`"byteOffset":%d`, len(data)-10), data)
	if body != text[len(text)-10:] || head != fmt.Sprintf("spillway://artifacts/x bytes %d-%d of %d (10 bytes of UTF-8 text)", len(data)-10, len(data), len(data)) {
		t.Errorf("tail: %q %q", head, body)
	}
	if _, err := run(t, r, Read, fmt.Sprintf(`"byteOffset":%d`, len(data)), data); !errors.Is(err, ErrInvalid) {
		t.Errorf("past the end: %v", err)
	}
	// Binary: base64 of the exact window.
	bin := []byte{0x89, 'P', 'N', 'G', 0, 0xff, 0xfe, 1, 2, 3}
	head, body = mustRun(t, r, Read, `"byteOffset":1,"byteLength":6`, bin)
	if got, _ := base64.StdEncoding.DecodeString(body); !bytes.Equal(got, bin[1:7]) || !strings.Contains(head, "bytes 1-7 of 10 (6 bytes, not UTF-8 text: base64; next: byteOffset=7)") {
		t.Errorf("binary: %q %q", head, body)
	}
}

// grepWant is grep -n's output for matches of re in lines with context c
// ("--" between groups only with context, as GNU grep prints them),
// computed by marking the lines to show, then printing runs of them.
func grepWant(lines []string, match func(string) bool, c int) (string, int) {
	show := make([]byte, len(lines))
	n := 0
	for i, l := range lines {
		if match(l) {
			n++
			show[i] = ':'
			for j := max(0, i-c); j <= min(len(lines)-1, i+c); j++ {
				if show[j] == 0 {
					show[j] = '-'
				}
			}
		}
	}
	var b strings.Builder
	prev := -2
	for i, s := range show {
		if s == 0 {
			continue
		}
		if c > 0 && prev >= 0 && i > prev+1 {
			b.WriteString("--\n")
		}
		fmt.Fprintf(&b, "%d%c%s\n", i+1, s, lines[i])
		prev = i
	}
	return b.String(), n
}

func TestGrep(t *testing.T) {
	ls := logLines()
	ls[99] = "short again" // lines as shown whole
	data := []byte(strings.Join(ls, "\r\n"))
	r := New(Limits{})
	for _, c := range []int{0, 1, 3} {
		head, body := mustRun(t, r, Grep, fmt.Sprintf(`"pattern":"WARN request \\d+7 ","context":%d,"maxMatches":1000`, c), data)
		want, n := grepWant(ls, func(s string) bool {
			i := strings.Index(s, "WARN request ")
			if i < 0 {
				return false
			}
			num, _, _ := strings.Cut(s[i+len("WARN request "):], " ")
			return len(num) >= 2 && strings.HasSuffix(num, "7")
		}, c)
		if n == 0 || body != want {
			t.Errorf("context %d: %d matches; got\n%s\nwant\n%s", c, n, body, want)
		}
		if head != fmt.Sprintf("spillway://artifacts/x: %d matching lines for /WARN request \\d+7 / in 500 lines", n) {
			t.Errorf("context %d: head %q", c, head)
		}
	}
	head, _ := mustRun(t, r, Grep, `"pattern":"zürich","ignoreCase":true,"maxMatches":5`, data)
	if head != "spillway://artifacts/x: 5 matching lines for /zürich/ (stopped at maxMatches=5; more match from line 6)" {
		t.Errorf("maxMatches: %q", head)
	}
	if _, err := run(t, r, Grep, `"pattern":"(unclosed"`, data); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "missing closing )") {
		t.Errorf("bad pattern: %v", err)
	}
}

// A pattern that backtracking engines take exponential time on, over a
// 4 MiB line: RE2 answers.
func TestGrepHostile(t *testing.T) {
	data := append(bytes.Repeat([]byte("a"), 4<<20), "\nab\n"...)
	head, body := mustRun(t, New(Limits{}), Grep, `"pattern":"(a*)*b$"`, data)
	if !strings.Contains(head, "1 matching lines") || body != "2:ab\n" {
		t.Errorf("%q %q", head, body)
	}
	long := `"pattern":"` + strings.Repeat("a", MaxPattern+1) + `"`
	if _, err := run(t, New(Limits{}), Grep, long, data); !errors.Is(err, ErrInvalid) {
		t.Errorf("long pattern: %v", err)
	}
}

type row struct {
	ID     int     `json:"id"`
	Status string  `json:"status"`
	Amount float64 `json:"amount"`
	Date   string  `json:"date"`
}

func rows(n int) []row {
	var rs []row
	for i := 0; i < n; i++ {
		rs = append(rs, row{ID: i + 1, Status: []string{"paid", "open", "void", "refunded"}[i*7%4], Amount: float64(i*37%8600) + 0.5, Date: fmt.Sprintf("2025-%02d-%02d", i%12+1, i%28+1)})
	}
	return rs
}

func TestJQ(t *testing.T) {
	rs := rows(2500)
	arr, _ := json.Marshal(rs)
	env, _ := json.Marshal(map[string]any{"data": map[string]any{"statements": []any{map[string]any{"rows": rs, "count": len(rs)}}}, "ok": true})
	var nd bytes.Buffer
	for _, x := range rs {
		b, _ := json.Marshal(x)
		nd.Write(b)
		nd.WriteString("\n")
	}
	paid, sum, maxAmt := 0, 0.0, 0.0
	for _, x := range rs {
		if x.Status == "paid" {
			paid++
		}
		sum += x.Amount
		maxAmt = max(maxAmt, x.Amount)
	}
	var ids []string
	for _, x := range rs[:3] {
		ids = append(ids, fmt.Sprint(x.ID))
	}
	r := New(Limits{})
	for _, tc := range []struct {
		name, args string
		data       []byte
		want       string
	}{
		{"array count", `"program":"[.[] | select(.status == \"paid\")] | length"`, arr, fmt.Sprintf("%d\n", paid)},
		{"array sum", `"program":"map(.amount) | add"`, arr, strconv.FormatFloat(sum, 'f', -1, 64) + "\n"},
		{"array max", `"program":"max_by(.amount).amount","format":"json"`, arr, strconv.FormatFloat(maxAmt, 'f', -1, 64) + "\n"},
		{"envelope", `"program":".data.statements[0] | .count, (.rows | length), .rows[-1].id"`, env, fmt.Sprintf("%d\n%d\n%d\n", len(rs), len(rs), rs[len(rs)-1].ID)},
		{"ndjson", `"program":".id","format":"ndjson","maxOutputs":3`, nd.Bytes(), strings.Join(ids, "\n") + "\n"},
		{"ndjson auto", `"program":"select(.id == 2500) | .date"`, nd.Bytes(), fmt.Sprintf("%q\n", rs[2499].Date)},
	} {
		_, body := mustRun(t, r, JQ, tc.args, tc.data)
		if body != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, body, tc.want)
		}
	}
	for _, tc := range []struct {
		name, args, data, wantErr string
	}{
		{"bad program", `"program":".[] |"`, `[1]`, "jq program:"},
		{"not JSON", `"program":"."`, `{"a":1,}`, "not JSON: invalid character '}'"},
		{"json but many", `"program":".","format":"json"`, "1\n2\n", "more than 1 value"},
		{"ndjson bad line", `"program":".","format":"ndjson"`, "1\n{\n", "not NDJSON: line 2"},
		{"runtime error", `"program":".a"`, `[1]`, "jq: expected an object"},
	} {
		_, err := run(t, r, JQ, tc.args, []byte(tc.data))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
		}
	}
}

// jq programs that never end, and an input over the cap, end within their
// bounds; the proxy's environment is not the program's.
func TestJQHostile(t *testing.T) {
	r := New(Limits{JQTimeout: 500 * time.Millisecond, MaxJQInput: 1 << 20})
	for _, p := range []string{`repeat(.)`, `range(1e9)`} {
		head, body := mustRun(t, r, JQ, `"program":"`+p+`","maxOutputs":50`, []byte(`1`))
		if strings.Count(body, "\n") != 50 || !strings.Contains(head, "stopped at maxOutputs=50") {
			t.Errorf("%s: %q (%d lines)", p, head, strings.Count(body, "\n"))
		}
	}
	if _, err := run(t, r, JQ, `"program":"last(repeat(1))"`, []byte(`1`)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "ran past its 500ms limit") {
		t.Errorf("endless program: %v", err)
	}
	big := append([]byte(`"`), bytes.Repeat([]byte("a"), 1<<20)...)
	if _, err := run(t, r, JQ, `"program":"length"`, append(big, '"')); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "jq reads at most 1048576") {
		t.Errorf("input over the cap: %v", err)
	}
	// A string doubled 40 times would be 1 TiB: the heap watcher stops it
	// (before it, the test process died of memory).
	mem := New(Limits{MaxJQHeap: 64 << 20})
	if _, err := run(t, mem, JQ, `"program":"reduce range(40) as $i (\"x\"; . + .) | length"`, []byte(`1`)); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "memory passed 64 MiB") {
		t.Errorf("a program that doubles a string: %v", err)
	}
	t.Setenv("SPILLWAY_TEST_SECRET", "s3cret")
	if _, body := mustRun(t, r, JQ, `"program":"[$ENV, env] | map(length)"`, []byte(`null`)); body != "[0,0]\n" {
		t.Errorf("the program sees the environment: %q", body)
	}
}

// An answer over MaxAnswer is cut and says so.
func TestAnswerCap(t *testing.T) {
	data := []byte(strings.Repeat("0123456789\n", 1000))
	out, err := run(t, New(Limits{MaxAnswer: 1000}), Read, `"limit":1000`, data)
	if err != nil || len(out) > 1200 || !strings.HasSuffix(out, "[answer cut at 1000 bytes: ask for a smaller window or fewer results]") {
		t.Errorf("%d bytes, %v: %q", len(out), err, out)
	}
	// A binary window: its base64 fits the cap (it was 4/3 of it).
	bin := bytes.Repeat([]byte{0xff, 0}, 2000)
	head, body := mustRun(t, New(Limits{MaxAnswer: 1000}), Read, `"byteOffset":10,"byteLength":4000`, bin)
	if got, _ := base64.StdEncoding.DecodeString(body); len(body) > 1000 || !bytes.Equal(got, bin[10:760]) || !strings.HasSuffix(head, "bytes 10-760 of 4000 (750 bytes, not UTF-8 text: base64; next: byteOffset=760)") {
		t.Errorf("binary: %d bytes of base64; %q", len(body), head)
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		tool, args, wantErr string
	}{
		{Read, `{}`, "uri is required"},
		{Read, `{"uri":"file:///etc/passwd"}`, "not a spillway://artifacts/"},
		{Read, `{` + testURI + `,"offset":0}`, "offset (a line number) must be from 1"},
		{Read, `{` + testURI + `,"limit":5001}`, "limit must be from 1 to 5000"},
		{Read, `{` + testURI + `,"offset":1,"byteOffset":0}`, "not both"},
		{Read, `{` + testURI + `,"byteLength":0}`, "byteLength must be"},
		{Read, `{` + testURI + `,"offset":"3"}`, "offset must be a int, not a string"},
		{Grep, `{` + testURI + `}`, "pattern is required"},
		{Grep, `{` + testURI + `,"pattern":"a","context":21}`, "context must be"},
		{JQ, `{` + testURI + `,"program":" "}`, "program is required"},
		{JQ, `{` + testURI + `,"program":".","format":"csv"}`, "format must be"},
		{JQ, `[1]`, "arguments:"},
		{"other", `{}`, "unknown tool"},
	} {
		_, err := Parse(tc.tool, []byte(tc.args))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s %s: %v, want %q", tc.tool, tc.args, err, tc.wantErr)
		}
	}
	c, err := Parse(Read, []byte(`{`+testURI+`}`))
	if err != nil || c.Offset != 1 || c.Limit != DefaultLines || c.Bytes || c.ID != "abcdefghijklmnopqrstuvwxyz234567" {
		t.Errorf("defaults: %+v %v", c, err)
	}
}

// FuzzParse: any arguments parse to a call within the bounds, or to an
// ErrInvalid; never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{}`, `null`, `{` + testURI + `,"offset":3,"limit":9}`, `{` + testURI + `,"byteOffset":-1}`,
		`{` + testURI + `,"pattern":"a(b","context":2,"maxMatches":0}`, `{` + testURI + `,"program":".[]","format":"ndjson","maxOutputs":1e3}`,
		`{"uri":"spillway://artifacts/../x"}`, `[`, `{"uri":1}`} {
		for _, tool := range Names {
			f.Add(tool, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, tool string, args []byte) {
		c, err := Parse(tool, args)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error not ErrInvalid: %v", err)
			}
			return
		}
		if c.Tool != tool || c.Limit > MaxLines || c.ByteLength > MaxByteLength || c.ByteOffset < 0 ||
			len(c.Pattern) > MaxPattern || c.Context > MaxContext || c.MaxMatches > MaxMatches ||
			len(c.Program) > MaxProgram || c.MaxOutputs > MaxOutputs {
			t.Fatalf("out of bounds: %+v", c)
		}
	})
}

// A read or grep that would scan past its time ends with a tool error,
// however long the line it is in.
func TestScanTimeout(t *testing.T) {
	r := New(Limits{Timeout: time.Nanosecond})
	for _, data := range [][]byte{bytes.Repeat([]byte("a\n"), 10000), bytes.Repeat([]byte("a"), 1<<20)} {
		for _, tc := range []struct{ tool, args string }{{Grep, `"pattern":"b"`}, {Read, `"offset":5000`}} {
			if _, err := run(t, r, tc.tool, tc.args, data); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "ran past its 1ns limit") {
				t.Errorf("%s over %d bytes: %v", tc.tool, len(data), err)
			}
		}
	}
}

// FuzzReadBytes: for any artifact and window, the answer is the
// artifact's bytes in the range its header states, inside the window:
// whole UTF-8 characters as text, or the exact window as base64.
func FuzzReadBytes(f *testing.F) {
	f.Add([]byte("héllo wörld € 𝄞"), int64(2), int64(3))
	f.Add([]byte("€€€"), int64(1), int64(1))
	f.Add([]byte{0xff, 0xfe, 'a', 0}, int64(0), int64(2))
	f.Add([]byte("a\r\nb"), int64(4), int64(1))
	f.Add([]byte{}, int64(0), int64(1))
	f.Fuzz(func(t *testing.T, data []byte, off, n int64) {
		if off < 0 || n < 1 || n > MaxByteLength {
			return
		}
		out, err := New(Limits{}).Run(ctx, Call{Tool: Read, Bytes: true, ByteOffset: off, ByteLength: n}, source(data))
		if off >= int64(len(data)) {
			if (err == nil) != (len(data) == 0 && off == 0) {
				t.Fatalf("window at %d of %d bytes: %q %v", off, len(data), out, err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		head, body, _ := strings.Cut(out, "\n")
		var lo, hi, size int64
		if _, err := fmt.Sscanf(head, "spillway://artifacts/x bytes %d-%d of %d", &lo, &hi, &size); err != nil || size != int64(len(data)) || lo < off || hi > off+n || lo > hi {
			t.Fatalf("header %q for window %d+%d of %d bytes (%v)", head, off, n, len(data), err)
		}
		if strings.Contains(head, "base64") {
			got, err := base64.StdEncoding.DecodeString(body)
			if err != nil || !bytes.Equal(got, data[lo:hi]) || lo != off {
				t.Fatalf("base64 window %q: %v", head, err)
			}
			return
		}
		if body != string(data[lo:hi]) || !utf8.ValidString(body) || hi-lo < min(n, int64(len(data))-off)-6 {
			t.Fatalf("text window %q: %q", head, body)
		}
	})
}

// FuzzReadLines: for any artifact and window, the numbered lines are the
// artifact's lines ("\n" or "\r\n" ended, a last one without), in order.
func FuzzReadLines(f *testing.F) {
	f.Add([]byte("a\r\nb\nc"), 2, 5)
	f.Add([]byte("\n\n\r\n"), 1, 10)
	f.Add([]byte("x\ry\n"), 1, 1)
	f.Add([]byte("z\xff\n"), 1, 3)
	f.Fuzz(func(t *testing.T, data []byte, offset, limit int) {
		if offset < 1 || limit < 1 || limit > MaxLines || offset > 1<<20 {
			return
		}
		all := strings.Split(string(data), "\n")
		lines := all
		if strings.HasSuffix(string(data), "\n") || len(data) == 0 {
			lines = lines[:len(lines)-1]
		}
		var want strings.Builder
		for i := offset; i < offset+limit && i <= len(lines); i++ {
			l := lines[i-1]
			if i < len(all) { // ended by "\n": a "\r" before it is part of the end
				l = strings.TrimSuffix(l, "\r")
			}
			if len(l) > maxLine {
				return // cut lines: TestReadLines
			}
			fmt.Fprintf(&want, "%6d\t%s\n", i, strings.ToValidUTF8(l, "\uFFFD"))
		}
		out, err := New(Limits{}).Run(ctx, Call{Tool: Read, Offset: offset, Limit: limit}, source(data))
		switch {
		case offset > len(lines) && (offset > 1 || len(lines) > 0):
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("offset %d of %d lines: %q %v", offset, len(lines), out, err)
			}
		case len(lines) == 0:
			if err != nil || !strings.HasSuffix(out, "the artifact is empty\n") {
				t.Fatalf("empty: %q %v", out, err)
			}
		default:
			if _, body, _ := strings.Cut(out, "\n"); err != nil || body != want.String() {
				t.Fatalf("offset %d limit %d: %q, want %q (%v)", offset, limit, body, want.String(), err)
			}
		}
	})
}

// A tenant runs one jq program at a time: while its endless program
// holds a slot, its second is refused at once and another tenant's runs.
// Before, the second waited for a slot, and two such programs held every
// slot (JQConcurrent) from every other tenant.
func TestJQOneRunPerTenant(t *testing.T) {
	r := New(Limits{JQTimeout: time.Hour, JQConcurrent: 2})
	src := func(tenant string) Source { s := source([]byte(`1`)); s.Tenant = tenant; return s }
	call := func(program string) Call { return Call{Tool: JQ, Program: program, MaxOutputs: 10} }
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := r.Run(cctx, call("last(repeat(1))"), src("a")); done <- err }()
	for {
		r.mu.Lock()
		busy := r.running["a"]
		r.mu.Unlock()
		if busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := r.Run(ctx, call("."), src("a")); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "another jq program of yours is running") {
		t.Errorf("the tenant's second run: %v", err)
	}
	if out, err := r.Run(ctx, call(". + 1"), src("b")); err != nil || !strings.HasSuffix(out, "\n2\n") {
		t.Errorf("another tenant's run: %q %v", out, err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("the endless run, cancelled: %v", err)
	}
	if out, err := r.Run(ctx, call("."), src("a")); err != nil || !strings.HasSuffix(out, "\n1\n") {
		t.Errorf("the tenant's run after: %q %v", out, err)
	}
}
