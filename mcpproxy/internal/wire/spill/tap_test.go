package spill

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
)

// recTap records what a Tap is told.
type recTap struct {
	name string
	mu   sync.Mutex
	got  bytes.Buffer
	ends []bool
	rels int
}

func (r *recTap) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got.Write(p)
}
func (r *recTap) End(complete bool) { r.mu.Lock(); r.ends = append(r.ends, complete); r.mu.Unlock() }

func (r *recTap) Release() { r.mu.Lock(); r.rels++; r.mu.Unlock() }

// seen is the string's bytes as the tap saw them.
func (r *recTap) seen() []byte { r.mu.Lock(); defer r.mu.Unlock(); return bytes.Clone(r.got.Bytes()) }

// keepTap is a Keeper in memory: it keeps the value it is given (text,
// or base64 data with b64) until its second Value with lose. What it saw
// (seen) is the value spelt when it hands it back, then what it is
// written.
type keepTap struct {
	*recTap
	b64, lose bool
	values    int
	val       bytes.Buffer
	handed    bool
}

func (k *keepTap) Base64() bool   { return k.b64 }
func (k *keepTap) Value(p []byte) { k.values++; k.val.Write(p) }
func (k *keepTap) Lost() bool     { return k.lose && k.values >= 2 }
func (k *keepTap) Handback(w io.Writer, form Form) error {
	if k.handed {
		panic("Handback twice")
	}
	k.handed = true
	sp := Spell(nil, k.val.Bytes(), form)
	k.recTap.Write(sp)
	_, err := w.Write(sp)
	return err
}
func (k *keepTap) Kept() (io.ReaderAt, bool) {
	if k.Lost() {
		return nil, false
	}
	return bytes.NewReader(k.val.Bytes()), true
}

type taps struct {
	mu   sync.Mutex
	all  []*recTap
	only string // the member name tapped
}

func (ts *taps) tap(name string) Tap {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if name != ts.only {
		return nil
	}
	t := &recTap{name: name}
	ts.all = append(ts.all, t)
	return t
}

// A Tap offered a spilled member value gets its escaped bytes exactly, in
// order, whatever the reads' sizes; End(true) once; Release once when the
// string goes. Other members, array elements and names are not offered.
func TestTap(t *testing.T) {
	ts := &taps{only: "text"}
	s := newSpooler(t, Options{Threshold: 100, Tap: ts.tap})
	text := strings.Repeat(`row \"quoted\" \u00e9\n`, 50)
	in := `{"content":[{"type":"text","text":"` + text + `"},"` + strings.Repeat("e", 200) + `"],` +
		`"other":"` + strings.Repeat("o", 300) + `","` + strings.Repeat("k", 300) + `":1}`
	out, err := s.Read(iotest.OneByteReader(strings.NewReader(in)), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts.all) != 1 {
		t.Fatalf("%d taps, want 1 (the text member only)", len(ts.all))
	}
	tp := ts.all[0]
	if tp.got.String() != text || len(tp.ends) != 1 || !tp.ends[0] || tp.rels != 0 {
		t.Fatalf("tap got %q, ends %v, releases %d", tp.got.String(), tp.ends, tp.rels)
	}
	var x *String
	for _, sp := range markers(out) {
		if y, ok := Lookup(out[sp[0]:sp[1]]); ok && y.Tap() != nil {
			x = y
		}
	}
	if x == nil || x.Tap() != Tap(tp) {
		t.Fatal("no String holds the tap")
	}
	raw, _ := io.ReadAll(x.Raw())
	if string(raw) != text {
		t.Fatalf("raw %q", raw)
	}
	x.Release()
	x.Release()
	if tp.rels != 1 {
		t.Fatalf("%d releases after Release twice, want 1", tp.rels)
	}
}

// A message that fails to read ends its string's Tap incomplete, and
// releases the Taps of the strings it had finished; a string folded into
// an array moving to disk whole releases its Tap.
func TestTapAbortAndFold(t *testing.T) {
	ts := &taps{only: "text"}
	s := newSpooler(t, Options{Threshold: 100, Tap: ts.tap})
	big := strings.Repeat("a", 200)
	if _, err := s.Read(strings.NewReader(`{"a":{"text":"`+big+`"},"b":{"text":"`+big), 0); err == nil {
		t.Fatal("a cut message was read")
	}
	if len(ts.all) != 2 || len(ts.all[0].ends) != 1 || !ts.all[0].ends[0] || ts.all[0].rels != 1 ||
		len(ts.all[1].ends) != 1 || ts.all[1].ends[0] || ts.all[1].rels != 0 {
		t.Fatalf("after a failed read: %+v %+v", ts.all[0], ts.all[1])
	}
	ts.all = nil
	s = newSpooler(t, Options{Threshold: 100, ArrayThreshold: 1000, Tap: ts.tap})
	in := `{"rows":[{"text":"` + big + `"}` + strings.Repeat(`,{"n":12345678901234567890}`, 100) + `]}`
	if _, err := s.Read(strings.NewReader(in), 0); err != nil {
		t.Fatal(err)
	}
	if len(ts.all) != 1 || ts.all[0].rels != 1 {
		t.Fatalf("a string folded into an array: %+v", ts.all)
	}
}

// A kept string released while an Expand is writing it keeps its Tap
// until that Expand is done: what Kept returned stays readable until
// Release, and Release waits for the writer (a client that reads slowly).
func TestKeptReleasedDuringExpand(t *testing.T) {
	var k *keepTap
	sp, err := New(Options{Dir: t.TempDir(), Threshold: 64, Tap: func(string) Tap {
		k = &keepTap{recTap: &recTap{}}
		return k
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	msg := `{"text":"` + strings.Repeat("abcdefgh", 1<<14) + `"}`
	raw, err := sp.Read(strings.NewReader(msg), 0)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Alive() != 0 {
		t.Fatalf("%d bytes spilled for a kept string", sp.Alive())
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Expand(pw, raw); pw.Close() }()
	first := make([]byte, 16)
	if _, err := io.ReadFull(pr, first); err != nil { // the writer is under way, and blocked
		t.Fatal(err)
	}
	sp.Release(raw)
	k.mu.Lock()
	rels := k.rels
	k.mu.Unlock()
	if rels != 0 {
		t.Fatal("the Tap was released while Expand was writing its string")
	}
	rest, err := io.ReadAll(pr)
	if err != nil || string(first)+string(rest) != msg {
		t.Fatalf("expanded %d bytes (%v), want the message's %d", len(first)+len(rest), err, len(msg))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	rels = k.rels
	k.mu.Unlock()
	if rels != 1 {
		t.Fatalf("the Tap was released %d times after Expand, want 1", rels)
	}
}

// pieces reads its strings one per Read.
type pieces []string

func (p *pieces) Read(b []byte) (int, error) {
	if len(*p) == 0 {
		return 0, io.EOF
	}
	n := copy(b, (*p)[0])
	if (*p)[0] = (*p)[0][n:]; (*p)[0] == "" {
		*p = (*p)[1:]
	}
	return n, nil
}

// A Keeper's string that stops being spelt canonically right after a read
// that ended inside an escape spills from there with the escape's rest
// read as an escape: `\` + `"` is a quote in the string, not its end. The
// Canon decoded the backslash, not the scanner.
func TestKeptLostInsideEscape(t *testing.T) {
	for _, tc := range []struct{ cut, rest string }{
		{`\`, `"b\u0041c`},   // a quote escaped across reads, then a \u escape Spell would not write
		{`\u00`, `22\u0041`}, // a \u escape cut, then one Spell would not write
		{`\u0`, `041`},       // the escape that is not canonical is the one cut
	} {
		var k *keepTap
		s := newSpooler(t, Options{Threshold: 64, Tap: func(string) Tap { k = &keepTap{recTap: &recTap{}}; return k }})
		head, body := `{"text":"`+strings.Repeat("a", 100), "bbbb"+tc.cut
		in := head + body + tc.rest + `"}`
		r := &pieces{head, body, tc.rest + `"}`}
		out, err := s.Read(r, 0)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		var b bytes.Buffer
		if err := Expand(&b, out); err != nil || b.String() != in {
			t.Fatalf("%q expanded to %q, %v", in, b.String(), err)
		}
		if !k.handed || string(k.seen()) != in[len(`{"text":"`):len(in)-2] {
			t.Fatalf("%q: handed back %v, the tap saw %q", in, k.handed, k.seen())
		}
		s.Release(out)
	}
}
