package spill

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/jsonrpc"
)

func newSpooler(t testing.TB, o Options) *Spooler {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		if n := s.Alive(); n != 0 {
			t.Errorf("after Close, %d bytes still spilled", n)
		}
	})
	return s
}

func expand(t testing.TB, raw []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Expand(&b, raw); err != nil {
		t.Fatalf("Expand: %v", err)
	}
	if n := ExpandedLen(raw); n != int64(b.Len()) {
		t.Errorf("ExpandedLen = %d, Expand wrote %d", n, b.Len())
	}
	return b.Bytes()
}

// markerCount counts the markers in raw.
func markerCount(raw []byte) int { return len(markers(raw)) }

func TestReadRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 60)
	tests := []struct {
		name    string
		in      string
		markers int
	}{
		{"short strings stay", `{"a":"b","c":[1,2.5e-3,true,false,null]}`, 0},
		{"whitespace kept", " \t{ \"a\" :\r\n [ 1 , \"b\" ] }\n ", 0},
		{"long value spills", `{"text":"` + long + `","n":1}`, 1},
		{"long name spills", `{"` + long + `":1}`, 1},
		{"escapes kept as sent", `["` + `\u00e9\n\"\\\/` + long + `"]`, 1},
		{"several in one message", `["` + long + `","` + long + `",{"x":"` + long + `"}]`, 3},
		{"threshold exactly stays", `"` + strings.Repeat("y", 50) + `"`, 0},
		{"one past spills", `"` + strings.Repeat("y", 51) + `"`, 1},
		{"empty string", `""`, 0},
		{"top-level number", `-0.5E+10`, 0},
		{"id last as the TypeScript SDK writes it", `{"result":{"content":[{"type":"text","text":"` + long + `"}]},"jsonrpc":"2.0","id":1}`, 1},
	}
	s := newSpooler(t, Options{Threshold: 50})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := s.Read(strings.NewReader(tt.in), 0)
			if err != nil {
				t.Fatal(err)
			}
			// Read a byte at a time, every token crosses a refill.
			if slow, err := s.Read(iotest.OneByteReader(strings.NewReader(tt.in)), 0); err != nil || markerCount(slow) != tt.markers || string(expand(t, slow)) != tt.in {
				t.Errorf("read byte by byte: %q, %v", slow, err)
			}
			if !json.Valid(out) {
				t.Errorf("inline %q is not JSON", out)
			}
			if n := markerCount(out); n != tt.markers {
				t.Errorf("%d markers in %q, want %d", n, out, tt.markers)
			}
			if got := expand(t, out); string(got) != tt.in {
				t.Errorf("Expand = %q, want %q", got, tt.in)
			}
		})
	}
}

func TestReadSpillsPastTheBuffer(t *testing.T) {
	// A string longer than the read buffer, split across many reads, and
	// one that ends inside the buffer it started in but past the threshold.
	s := newSpooler(t, Options{Threshold: 1000})
	big := strings.Repeat("abc\\n", 3*readSize/5)
	in := `{"a":"` + big + `","b":"` + strings.Repeat("z", 1500) + `","id":7}`
	out, err := s.Read(iotestHalf(strings.NewReader(in)), 4096)
	if err != nil {
		t.Fatal(err)
	}
	if markerCount(out) != 2 || len(out) > 200 {
		t.Fatalf("inline %q", out)
	}
	if got := expand(t, out); string(got) != in {
		t.Fatalf("round trip differs (len %d, want %d)", len(got), len(in))
	}
	x, ok := Lookup(jsonrpc.RawMember(out, "a"))
	if !ok || x.Len() != int64(len(big)) {
		t.Fatalf("Lookup(a) = %v, %v", x, ok)
	}
	text, err := io.ReadAll(x.Text())
	if err != nil || string(text) != strings.Repeat("abc\n", 3*readSize/5) {
		t.Fatalf("Text: %v, %d bytes", err, len(text))
	}
	if h := x.Head(5); string(h) != "abc\na" {
		t.Errorf("Head(5) = %q", h)
	}
}

// iotestHalf reads at most 1000 bytes at a time, to cross edges often.
func iotestHalf(r io.Reader) io.Reader { return &smallReads{r} }

type smallReads struct{ r io.Reader }

func (s *smallReads) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), 1000)]) }

func TestReadMalformed(t *testing.T) {
	tests := []struct{ in, wantErr string }{
		{`{"a":1`, "input ends"},
		{`{"a" 1}`, "after a member name"},
		{`{"a":1,}`, "where a member name should be"},
		{`[1,]`, "where a value should be"},
		{`[1 2]`, "after a value"},
		{`{"a":1} x`, "after the value"},
		{`{"a":1}{}`, "after the value"},
		{`"abc`, "inside a string"},
		{`"a\qb"`, "invalid escape"},
		{`"a\u12g4"`, "invalid \\u escape"},
		{"\"a\x01b\"", "control character"},
		{`01`, "after the value"},
		{`-`, "inside a number"},
		{`1.`, "inside a number"},
		{`1e+`, "inside a number"},
		{`tru`, "inside true"},
		{`nul1`, "in null"},
		{`{1:2}`, "where a member name should be"},
		{strings.Repeat("[", MaxDepth+1), "nesting deeper"},
	}
	s := newSpooler(t, Options{Threshold: 2})
	for _, tt := range tests {
		_, err := s.Read(strings.NewReader(tt.in), 0)
		if err == nil || !errors.Is(err, jsonrpc.ErrMalformed) || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("Read(%.40q) = %v, want malformed %q", tt.in, err, tt.wantErr)
		}
		if json.Valid([]byte(tt.in)) {
			t.Errorf("%q is valid JSON: a bad case", tt.in)
		}
	}
	if n := s.Alive(); n != 0 {
		t.Errorf("%d bytes left spilled by failed reads", n)
	}
	if _, err := s.Read(strings.NewReader(" \r\n "), 0); !errors.Is(err, io.EOF) {
		t.Errorf("whitespace only: %v, want io.EOF", err)
	}
}

func TestReadBounds(t *testing.T) {
	s := newSpooler(t, Options{Threshold: 10, MaxBytes: 100})
	// Inline over the cap: a long run of small values.
	_, err := s.Read(strings.NewReader("["+strings.Repeat("1,", 1000)+"1]"), 500)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("inline 2001 bytes, cap 500: %v", err)
	}
	// Whitespace counts too: it is kept.
	_, err = s.Read(strings.NewReader("1"+strings.Repeat(" ", 1000)), 500)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("1000 spaces, cap 500: %v", err)
	}
	// What spills does not count against the cap, but against MaxBytes.
	out, err := s.Read(strings.NewReader(`["`+strings.Repeat("a", 90)+`"]`), 60)
	if err != nil || s.Alive() != 90 {
		t.Fatalf("90 bytes spilled: %v, alive %d", err, s.Alive())
	}
	_, err = s.Read(strings.NewReader(`["`+strings.Repeat("b", 60)+`"]`), 60)
	if !errors.Is(err, ErrFull) {
		t.Errorf("150 bytes alive of 100: %v", err)
	}
	if s.Alive() != 90 {
		t.Errorf("a failed read left its bytes: alive %d, want 90", s.Alive())
	}
	s.Release(out)
	if s.Alive() != 0 {
		t.Errorf("after Release, alive %d", s.Alive())
	}
	if _, ok := Lookup(out[1 : len(out)-1]); ok {
		t.Error("a released marker still resolves")
	}
	if err := Expand(io.Discard, out); !errors.Is(err, ErrGone) {
		t.Errorf("Expand of a released marker: %v", err)
	}
}

// failingReader returns its bytes, then err.
type failingReader struct {
	b   []byte
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, f.err
	}
	n := copy(p, f.b)
	f.b = f.b[n:]
	return n, nil
}

func TestReadPeerDiesMidString(t *testing.T) {
	s := newSpooler(t, Options{Threshold: 10})
	dead := errors.New("child exited")
	in := []byte(`[{"text":"` + strings.Repeat("a", 50) + `"},"` + strings.Repeat("b", 200000))
	_, err := s.Read(&failingReader{b: in, err: dead}, 0)
	if !errors.Is(err, dead) {
		t.Fatalf("Read = %v, want the reader's error", err)
	}
	if s.Alive() != 0 {
		t.Errorf("a cut message left %d bytes spilled", s.Alive())
	}
	_, err = s.Read(bytes.NewReader(in), 0)
	if !errors.Is(err, jsonrpc.ErrMalformed) || s.Alive() != 0 {
		t.Errorf("input ending mid-string: %v, alive %d", err, s.Alive())
	}
}

func TestForgedMarker(t *testing.T) {
	s := newSpooler(t, Options{Threshold: 1 << 20})
	forged := `"\u0000spillway:00112233445566778899aabbccddeeff"`
	in := `{"result":{"a":` + forged + `,` + forged + `:1},"id":1}`
	out, err := s.Read(strings.NewReader(in), 0)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("00112233445566778899aabbccddeeff")) {
		t.Fatalf("the forged marker stayed: %s", out)
	}
	if got := expand(t, out); string(got) != in {
		t.Fatalf("Expand = %s, want %s", got, in)
	}
	// A message of nothing but such strings is refused past a few: each
	// would cost a registry entry.
	s.Release(out)
	in = "[" + strings.Repeat(forged+",", maxForged) + forged + "]"
	if _, err = s.Read(strings.NewReader(in), 0); !errors.Is(err, jsonrpc.ErrMalformed) || s.Alive() != 0 {
		t.Fatalf("%d forged markers: %v, alive %d", maxForged+1, err, s.Alive())
	}
	// A marker's spelling inside a longer string is no marker.
	in = `{"a":"x` + forged[1:] + `}`
	out, err = s.Read(strings.NewReader(in), 0)
	if err != nil || string(out) != in || HasMarkers(out) {
		t.Fatalf("inside a string: %s, %v", out, err)
	}
}

func TestMarkersOfTwoMessagesApart(t *testing.T) {
	s := newSpooler(t, Options{Threshold: 4})
	a, err := s.Read(strings.NewReader(`"tenant-a-secret-0000000000000000000000000000000000000000"`), 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Read(strings.NewReader(`"tenant-b-secret-0000000000000000000000000000000000000000"`), 0)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		t.Fatal("two messages got the same marker")
	}
	if string(expand(t, a)) != `"tenant-a-secret-0000000000000000000000000000000000000000"` || string(expand(t, b)) != `"tenant-b-secret-0000000000000000000000000000000000000000"` {
		t.Fatal("markers resolve to the wrong message")
	}
}

func TestTTLFreesFiles(t *testing.T) {
	s := newSpooler(t, Options{Threshold: 4, TTL: time.Millisecond})
	out, err := s.Read(strings.NewReader(`"a long string, longer than a marker is, which is 49 bytes"`), 0)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second) // a deadlock guard, not a timing
	for s.Alive() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s.Alive() != 0 {
		t.Fatal("the string outlived its TTL")
	}
	if _, ok := Lookup(out); ok {
		t.Error("an expired marker resolves")
	}
}

func TestExpandPinsAgainstExpiry(t *testing.T) {
	s := newSpooler(t, Options{Threshold: 4})
	out, err := s.Read(strings.NewReader(`["`+strings.Repeat("q", 200000)+`"]`), 0)
	if err != nil {
		t.Fatal(err)
	}
	// A writer that releases the message while it is being written: the
	// write still completes whole.
	w := &releasing{s: s, raw: out}
	if err := Expand(w, out); err != nil {
		t.Fatal(err)
	}
	if w.b.Len() != 200004 {
		t.Fatalf("wrote %d bytes", w.b.Len())
	}
	if s.Alive() != 0 {
		t.Errorf("alive %d after the last pin", s.Alive())
	}
}

type releasing struct {
	s   *Spooler
	raw []byte
	b   bytes.Buffer
}

func (r *releasing) Write(p []byte) (int, error) {
	r.s.Release(r.raw)
	return r.b.Write(p)
}

func TestText(t *testing.T) {
	tests := []string{
		`plain`, `caf\u00e9`, `\ud83d\ude00 pair`, `\ud83d lone high`, `\ude00 lone low`,
		`\ud83d\ud83d\ude00 high then pair`, `\ud83d\u0041`, `\u0000nul`, `\b\f\n\r\t\"\\\/`,
		"raw \xff invalid \xc3 utf8 \xe2\x82", "é ünïcödé 😀", `\u00E9 upper hex`, ``,
	}
	for _, in := range tests {
		var want string
		if err := json.Unmarshal([]byte(`"`+in+`"`), &want); err != nil {
			t.Fatalf("bad case %q: %v", in, err)
		}
		for _, size := range []int{1, 3, 7, 4096} {
			got, err := io.ReadAll(&limitedP{newTextReader(strings.NewReader(in)), size})
			if err != nil || string(got) != want {
				t.Errorf("Text(%q) read by %d = %q, %v; want %q", in, size, got, err, want)
			}
		}
	}
	for _, bad := range []string{`\`, `\x`, `\u12`, `\u12z4`} {
		if _, err := io.ReadAll(newTextReader(strings.NewReader(bad))); err == nil {
			t.Errorf("Text(%q): no error", bad)
		}
	}
}

// limitedP reads into at most n bytes of p at a time.
type limitedP struct {
	r io.Reader
	n int
}

func (l *limitedP) Read(p []byte) (int, error) { return l.r.Read(p[:min(len(p), l.n)]) }

func TestBase64(t *testing.T) {
	data := []byte("any carnal pleasure, \x00\xff binary, long enough to spill")
	for _, enc := range []string{
		base64.StdEncoding.EncodeToString(data),
		base64.RawStdEncoding.EncodeToString(data),
		"YW55IGNh\\ncm5hbCBwbGVhc3VyZSwgAP8gYmluYXJ5LCBsb25nIGVub3VnaCB0byBzcGlsbA==", // a JSON-escaped line break
	} {
		s := newSpooler(t, Options{Threshold: 4})
		out, err := s.Read(strings.NewReader(`"`+enc+`"`), 0)
		if err != nil {
			t.Fatal(err)
		}
		x, _ := Lookup(out)
		got, err := io.ReadAll(x.Base64())
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("Base64 of %q = %q, %v", enc, got, err)
		}
	}
	for _, bad := range []string{"YW=55", "YW55===", "Y", "YW55*"} {
		_, err := io.ReadAll(newBase64Reader(strings.NewReader(bad)))
		if !errors.Is(err, ErrBase64) {
			t.Errorf("Base64(%q): %v, want ErrBase64", bad, err)
		}
	}
}

func TestClosed(t *testing.T) {
	s := newSpooler(t, Options{})
	s.Close()
	if _, err := s.Read(strings.NewReader(`1`), 0); !errors.Is(err, ErrClosed) {
		t.Errorf("Read after Close: %v", err)
	}
}

func TestSpillFilesUnlinked(t *testing.T) {
	dir := t.TempDir()
	s := newSpooler(t, Options{Dir: dir, Threshold: 4})
	if _, err := s.Read(strings.NewReader(`"0123456789012345678901234567890123456789012345678901234567890123456789"`), 0); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 0 {
		t.Errorf("spill dir holds %d entries (%v); files must be unlinked", len(ents), err)
	}
}

// hasSpecial finds a special byte anywhere among eight, whatever the
// others (high bytes and borrows included), and nothing else.
func TestHasSpecial(t *testing.T) {
	eachWord(func(b [8]byte) {
		want := false
		for _, c := range b {
			want = want || special[c]
		}
		if got := hasSpecial(binary.LittleEndian.Uint64(b[:])); got != want {
			t.Fatalf("hasSpecial(% x) = %v, want %v", b, got, want)
		}
	})
}

// notPlain's lowest flag is the first byte a byte-by-byte reading stops
// at (a control byte, '"', '\\' or one over 0x7f), for every byte value
// in every position, among the same neighbours; 0 when there is none.
func TestNotPlain(t *testing.T) {
	eachWord(func(b [8]byte) {
		want := 0
		for want < 8 && b[want] >= 0x20 && b[want] != '"' && b[want] != '\\' && b[want] < 0x80 {
			want++
		}
		if got := bits.TrailingZeros64(notPlain(binary.LittleEndian.Uint64(b[:]))) / 8; got != want {
			t.Fatalf("notPlain(% x) stops at %d, want %d", b, got, want)
		}
	})
}

// plainLen counts the bytes before a word's first backslash or non-ASCII
// byte as a byte-by-byte reading does, for every byte value in every
// position, among the same neighbours.
func TestPlainLen(t *testing.T) {
	eachWord(func(b [8]byte) {
		want := 0
		for want < 8 && b[want] != '\\' && b[want] < 0x80 {
			want++
		}
		if got := plainLen(binary.LittleEndian.Uint64(b[:])); got != want {
			t.Fatalf("plainLen(% x) = %d, want %d", b, got, want)
		}
	})
}

// eachWord calls f with every word made of one byte value (any) in one
// position (any) among eight copies of a neighbour: plain bytes, bytes
// next to the tested ones, the tested ones themselves.
func eachWord(f func([8]byte)) {
	fills := []byte{'a', 0x7f, 0x80, 0xff, '!', '#', '[', ']', 0x20, '\\', 0x00, 0xdc}
	for _, fill := range fills {
		for c := range 256 {
			for k := range 8 {
				var b [8]byte
				for i := range b {
					b[i] = fill
				}
				b[k] = byte(c)
				f(b)
			}
		}
	}
}

// TestDecodeBulk holds the eight-letter base64 decoding to the library's:
// every byte value in every position of sixteen letters, decoded in bulk
// and the rest by the library, gives the library's bytes, or stops where
// the library fails.
func TestDecodeBulk(t *testing.T) {
	valid := []byte(base64.RawStdEncoding.EncodeToString([]byte("0123456789ab")))
	for pos := range valid {
		for c := range 256 {
			in := bytes.Clone(valid)
			in[pos] = byte(c)
			want, werr := base64.RawStdEncoding.DecodeString(string(in))
			dst := make([]byte, 16)
			n, m := decodeBulk(dst, in)
			if m%8 != 0 || n != m/8*6 || !bytes.Equal(dst[:n], want[:min(n, len(want))]) {
				t.Fatalf("decodeBulk(%q) = %x (%d letters); want a prefix of %x", in, dst[:n], m, want)
			}
			k, err := base64.RawStdEncoding.Decode(dst[n:], in[m:])
			if (err == nil) != (werr == nil) || err == nil && !bytes.Equal(dst[:n+k], want) {
				t.Fatalf("decodeBulk(%q) then the library: %x, %v; want %x, %v", in, dst[:n+k], err, want, werr)
			}
		}
	}
}

// TestDecodeBase64TailAllocs: the last few letters of a string (and its
// padding) are decoded where they lie, not through the general way, whose
// two buffers (96 KiB) every string's end cost before.
func TestDecodeBase64TailAllocs(t *testing.T) {
	in := base64.StdEncoding.EncodeToString([]byte("a short blob, whose last quantum is padded"))
	out := make([]byte, 1<<10)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, n := DecodeBase64(strings.NewReader(in)), 0
	var err error
	for err == nil {
		var k int
		k, err = r.Read(out[n:])
		n += k
	}
	runtime.ReadMemStats(&after)
	if err == io.EOF {
		err = nil
	}
	if err != nil || string(out[:n]) != "a short blob, whose last quantum is padded" {
		t.Fatalf("decoded %q, %v", out[:n], err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 80<<10 {
		t.Errorf("decoding %d letters allocated %d KiB; want the letters' 64 KiB buffer and little more", len(in), got>>10)
	}
}

// TestDecodeBase64SourceFails: a source that fails part way (a peer gone
// mid-string) fails the decoding with its error, every time it is read
// again, never as a short success.
func TestDecodeBase64SourceFails(t *testing.T) {
	gone := errors.New("peer gone")
	letters := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("0123456789"), 1000))
	for _, cut := range []int{0, 5, 8, 4096, len(letters) - 3} {
		r := DecodeBase64(io.MultiReader(strings.NewReader(letters[:cut]), iotest.ErrReader(gone)))
		got, err := io.ReadAll(r)
		if !errors.Is(err, gone) || len(got) > cut/4*3 {
			t.Errorf("cut after %d letters: %d bytes, %v; want at most %d bytes and the source's error", cut, len(got), err, cut/4*3)
		}
		if _, err := r.Read(make([]byte, 64)); !errors.Is(err, gone) {
			t.Errorf("cut after %d letters, read again: %v; want the source's error", cut, err)
		}
	}
}

// TestLongRunEnds: a run of plain string content long enough for skipRun
// ends at a special byte wherever it is (around the words, windows and
// read boundaries), and at no other: each verdict is encoding/json's,
// and what is read is kept byte for byte.
func TestLongRunEnds(t *testing.T) {
	s := newSpooler(t, Options{Threshold: 1 << 20})
	bytesToTry := []byte{'"', '\\', 0x7f, 0x80, 0xff, ' ', 'A'}
	for c := range byte(0x20) {
		bytesToTry = append(bytesToTry, c)
	}
	run := bytes.Repeat([]byte("QUJD"), (3*window+2*longRun)/4)
	for _, c := range bytesToTry {
		for pos := 0; pos < len(run); pos += 7 {
			in := fmt.Appendf(nil, `{"a":"%s%c%s"}`, run[:pos], c, run[pos+1:])
			for _, src := range []io.Reader{bytes.NewReader(in), iotestHalf(bytes.NewReader(in))} {
				out, err := s.Read(src, 0)
				if valid := json.Valid(in); valid != (err == nil) {
					t.Fatalf("byte %#x at %d: valid %v, read err %v", c, pos, valid, err)
				}
				if err == nil {
					if !bytes.Equal(out, in) {
						t.Fatalf("byte %#x at %d: read %q", c, pos, out)
					}
					s.Release(out)
				}
			}
		}
	}
}

// gatedReader gives src's first n bytes, then waits for open before the
// rest; reached is closed once the first n are read.
type gatedReader struct {
	src           io.Reader
	n             int
	reached, open chan struct{}
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if g.n == 0 {
		if g.reached != nil {
			close(g.reached)
			g.reached = nil
		}
		<-g.open
		return g.src.Read(p)
	}
	k, err := g.src.Read(p[:min(len(p), g.n)])
	g.n -= k
	return k, err
}

// TestMaxInlineAcrossReads: two messages that each fit their own cap
// but not Options.MaxInline together: the second fails with ErrBusy
// (an ErrFull) while the first is still being read, and the first reads
// whole; once it has, the second fits, and nothing stays reserved.
func TestMaxInlineAcrossReads(t *testing.T) {
	s := newSpooler(t, Options{MaxInline: 1 << 20})
	var msg bytes.Buffer // 768 KiB of small members: all of it stays inline
	msg.WriteString(`{"result":{"structuredContent":{`)
	for i := 0; msg.Len() < 768<<10; i++ {
		fmt.Fprintf(&msg, `"k%d":%d,`, i, i)
	}
	msg.WriteString(`"end":true}},"jsonrpc":"2.0","id":1}`)
	in := msg.Bytes()

	g := &gatedReader{src: bytes.NewReader(in), n: 700 << 10, reached: make(chan struct{}), open: make(chan struct{})}
	reached := g.reached
	type result struct {
		out []byte
		err error
	}
	first := make(chan result, 1)
	go func() {
		out, err := s.Read(g, 0)
		first <- result{out, err}
	}()
	<-reached
	if _, err := s.Read(bytes.NewReader(in), 0); !errors.Is(err, ErrBusy) || !errors.Is(err, ErrFull) {
		t.Fatalf("second message while the first is read: err %v, want ErrBusy", err)
	}
	close(g.open)
	r := <-first
	if r.err != nil || !bytes.Equal(r.out, in) {
		t.Fatalf("first message: %d bytes, err %v", len(r.out), r.err)
	}
	out, err := s.Read(bytes.NewReader(in), 0)
	if err != nil || !bytes.Equal(out, in) {
		t.Fatalf("second message after the first: %d bytes, err %v", len(out), err)
	}
	if n := s.inline.Load(); n != 0 {
		t.Errorf("%d bytes still reserved after every Read returned", n)
	}
}

// One party's messages spill at most ShareMax bytes at once: past it its
// Read fails with ErrFull, another party's does not, and a release gives
// the party its room back.
func TestShare(t *testing.T) {
	sp := newSpooler(t, Options{Threshold: 64, MaxBytes: 10000, ShareMax: 4000})
	a, b := sp.For("a"), sp.For("b")
	msg := `{"text":"` + strings.Repeat("x", 3000) + `"}`
	first, err := a.Read(strings.NewReader(msg), 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := aliveFor(sp, "a"); n != 3000 {
		t.Fatalf("a holds %d bytes, want 3000", n)
	}
	if _, err := sp.For("a").Read(strings.NewReader(msg), 0); !errors.Is(err, ErrFull) {
		t.Fatalf("a's second message past its share: %v, want ErrFull", err)
	}
	if n := aliveFor(sp, "a"); n != 3000 || sp.Alive() != 3000 {
		t.Fatalf("after the refused message: a holds %d, the Spooler %d; want 3000, 3000", n, sp.Alive())
	}
	other, err := b.Read(strings.NewReader(msg), 0)
	if err != nil {
		t.Fatalf("b's message while a's share is full: %v", err)
	}
	sp.Release(first)
	if n := aliveFor(sp, "a"); n != 0 {
		t.Fatalf("a holds %d bytes after its release", n)
	}
	again, err := a.Read(strings.NewReader(msg), 0)
	if err != nil {
		t.Fatalf("a's message after its release: %v", err)
	}
	var out bytes.Buffer
	if err := Expand(&out, again); err != nil || out.String() != msg {
		t.Fatalf("expanded %d bytes, %v", out.Len(), err)
	}
	sp.Release(again)
	sp.Release(other)
	if len(sp.shares) != 0 || sp.Alive() != 0 {
		t.Fatalf("%d parties, %d bytes left after every release", len(sp.shares), sp.Alive())
	}
}

// aliveFor is the number of bytes sp holds in spill files for key (see
// For), when Options.ShareMax bounds them; else 0.
func aliveFor(sp *Spooler, key string) int64 {
	sp.sharesMu.Lock()
	defer sp.sharesMu.Unlock()
	return sp.shares[key]
}
