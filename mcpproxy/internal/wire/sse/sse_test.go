package sse

import (
	"bytes"
	"errors"
	"io"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// readAll reads events until the end, keeping too-large errors in line.
func readAll(t *testing.T, rd *Reader) (evs []Event, errs []error) {
	t.Helper()
	for {
		ev, err := rd.Next()
		var big *TooLargeError
		switch {
		case errors.As(err, &big):
			errs = append(errs, err)
			evs = append(evs, Event{})
		case err != nil:
			return evs, append(errs, err)
		default:
			evs = append(evs, ev)
		}
	}
}

func TestReader(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		in   string
		want []Event
		end  error
	}{
		{"multi-line data", "id: 1\nevent: message\ndata: {\"a\":\ndata: 1}\n\n",
			[]Event{{ID: "1", HasID: true, Name: "message", Data: []byte("{\"a\":\n1}"), HasData: true}}, io.EOF},
		{"comment keepalive", ": ping\n\n:\n\n",
			[]Event{{Comments: []string{"ping"}}, {Comments: []string{""}}}, io.EOF},
		{"id-only stays id-only", "id: 7\n\n",
			[]Event{{ID: "7", HasID: true}}, io.EOF},
		{"retry hint alone", "retry: 1500\n\n",
			[]Event{{Retry: 1500 * ms, HasRetry: true}}, io.EOF},
		{"retry zero is a hint", "id: a\nretry: 0\n\n",
			[]Event{{ID: "a", HasID: true, HasRetry: true}}, io.EOF},
		{"empty data is data", "data:\n\ndata\n\n",
			[]Event{{Data: []byte{}, HasData: true}, {Data: []byte{}, HasData: true}}, io.EOF},
		{"empty id resets", "id:\n\n", []Event{{HasID: true}}, io.EOF},
		{"CRLF", "data: x\r\nid: 2\r\n\r\n",
			[]Event{{ID: "2", HasID: true, Data: []byte("x"), HasData: true}}, io.EOF},
		{"lone CR", "data: a\rdata: b\r\rid: 3\r\r",
			[]Event{{Data: []byte("a\nb"), HasData: true}, {ID: "3", HasID: true}}, io.EOF},
		{"one space only is dropped", "data:  two\ndata:none\n\n",
			[]Event{{Data: []byte(" two\nnone"), HasData: true}}, io.EOF},
		{"unknown fields are skipped", "foo: bar\nverylongname: x\n\ndata: y\nfoo\n\n",
			[]Event{{Data: []byte("y"), HasData: true}}, io.EOF},
		{"bad retry ignored", "retry: 1x\n\nretry: -5\ndata: z\n\n",
			[]Event{{Data: []byte("z"), HasData: true}}, io.EOF},
		{"id with NUL ignored", "id: a\x00b\ndata: z\n\n",
			[]Event{{Data: []byte("z"), HasData: true}}, io.EOF},
		{"byte-order mark", "\xEF\xBB\xBFdata: z\n\n",
			[]Event{{Data: []byte("z"), HasData: true}}, io.EOF},
		{"blank lines only", "\n\r\n\r\n", nil, io.EOF},
		{"cut inside an event", "data: x\n", nil, io.ErrUnexpectedEOF},
		{"cut inside a line", "data: x", nil, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte at a time as well: nothing may depend on chunking.
			for _, src := range []io.Reader{strings.NewReader(tt.in), &oneByte{s: tt.in}} {
				evs, errs := readAll(t, NewReader(src, 0))
				if !reflect.DeepEqual(evs, tt.want) {
					t.Errorf("events = %+v, want %+v", evs, tt.want)
				}
				if len(errs) != 1 || !errors.Is(errs[0], tt.end) {
					t.Errorf("end = %v, want %v", errs, tt.end)
				}
			}
		})
	}
}

type oneByte struct {
	s string
	i int
}

func (o *oneByte) Read(p []byte) (int, error) {
	if o.i >= len(o.s) {
		return 0, io.EOF
	}
	p[0] = o.s[o.i]
	o.i++
	return 1, nil
}

// A live stream ending its lines with a lone CR: each event must come out
// as soon as its blank line is in, without waiting for the next byte (it
// could be an LF of a CRLF, but it may never come).
func TestReaderLoneCRDoesNotStall(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	rd := NewReader(pr, 0)
	got := make(chan Event)
	go func() {
		for {
			ev, err := rd.Next()
			if err != nil {
				close(got)
				return
			}
			got <- ev
		}
	}()
	for i, chunk := range []string{"data: one\r\r", "\ndata: two\r\n\r", "\n: ping\r\r", "id: 4\r\r"} {
		go pw.Write([]byte(chunk))
		select {
		case ev := <-got:
			t.Logf("event %d: %+v", i, ev)
		case <-time.After(5 * time.Second):
			t.Fatalf("event %d: the reader waits for the byte after CR", i)
		}
	}
}

func TestReaderTooLarge(t *testing.T) {
	big := strings.Repeat("y", 1000)
	in := "id: 1\ndata: {\"id\":5,\"result\":\"" + big + "\"}\nid: 2\n\n" + // over: discarded, id seen after the data
		": keepalive\n\n" +
		"data: " + big + "\ndata: " + big + "\n\n" + // over across lines, no id
		"id: 3\ndata: small\n\n"
	rd := NewReader(strings.NewReader(in), 512)
	_, err := rd.Next()
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Fatalf("first event: %v, want a TooLargeError", err)
	}
	if tl.ID != "2" || !tl.HasID || tl.Limit != 512 || tl.Size != int64(len("id: 1\ndata: {\"id\":5,\"result\":\"\"}\nid: 2\n\n")+len(big)) ||
		!bytes.HasPrefix(tl.Head, []byte(`{"id":5,"result":"yyy`)) || string(tl.Tail) != strings.Repeat("y", 254)+`"}` {
		t.Errorf("error = id %q (%v) limit %d size %d head %.30q tail %q", tl.ID, tl.HasID, tl.Limit, tl.Size, tl.Head, tl.Tail)
	}
	if !strings.Contains(err.Error(), "exceeds the 512 byte limit") {
		t.Errorf("message %q", err)
	}
	if ev, err := rd.Next(); err != nil || len(ev.Comments) != 1 {
		t.Fatalf("after the large event: %+v %v", ev, err)
	}
	if _, err := rd.Next(); !errors.As(err, &tl) || tl.HasID || len(tl.Head) != 2001 || string(tl.Tail) != strings.Repeat("y", 256) {
		t.Fatalf("second large event: %v %+v", err, tl)
	}
	if ev, err := rd.Next(); err != nil || string(ev.Data) != "small" || ev.ID != "3" {
		t.Fatalf("after it: %+v %v", ev, err)
	}
	if rd.LastEventID() != "3" {
		t.Errorf("LastEventID = %q", rd.LastEventID())
	}
}

// A huge event never held whole: a 64 MB data line is read in bounded
// memory and reported.
func TestReaderTooLargeIsNotBuffered(t *testing.T) {
	src := io.MultiReader(strings.NewReader("id: 9\ndata: "), &repeat{n: 64 << 20}, strings.NewReader("\n\nid: 10\ndata: ok\n\n"))
	rd := NewReader(src, 1<<20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := rd.Next(); !errors.As(err, new(*TooLargeError)) {
		t.Fatalf("got %v", err)
	}
	runtime.ReadMemStats(&after)
	// The event up to the limit, grown by appending (a few times the
	// limit in all), never the 64 MB.
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("%d bytes allocated to discard a 64 MB event over a 1 MB limit", n)
	}
	if ev, err := rd.Next(); err != nil || string(ev.Data) != "ok" {
		t.Fatalf("next: %+v %v", ev, err)
	}
}

type repeat struct{ n int }

func (r *repeat) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.n)
	for i := range p[:n] {
		p[i] = 'x'
	}
	r.n -= n
	return n, nil
}

func TestWriter(t *testing.T) {
	rec := httptest.NewRecorder()
	SetHeaders(rec.Header())
	w := NewWriter(rec)
	evs := []Event{
		{ID: "1", Name: "message", Data: []byte("{\n  \"a\": 1\r\n}")},
		{ID: "p", HasData: true, Retry: time.Second},
		{ID: "only"},
		{Comments: []string{"ping"}},
		{HasRetry: true},
		{},
	}
	for _, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	want := "id: 1\nevent: message\ndata: {\ndata:   \"a\": 1\ndata: }\n\n" +
		"id: p\nretry: 1000\ndata:\n\n" +
		"id: only\n\n" +
		": ping\n\n" +
		"retry: 0\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("wrote\n%q\nwant\n%q", got, want)
	}
	if !rec.Flushed || rec.Header().Get("X-Accel-Buffering") != "no" || rec.Header().Get("Content-Type") != "text/event-stream" {
		t.Errorf("flushed %v, headers %v", rec.Flushed, rec.Header())
	}
}

// A value from a peer cannot add fields or events.
func TestWriterRefusesInjection(t *testing.T) {
	for _, ev := range []Event{
		{ID: "1\ndata: evil", Data: []byte("x")},
		{ID: "1\rdata: evil"},
		{ID: "a\x00"},
		{Name: "message\n\ndata: evil"},
		{Comments: []string{"ok", "x\ndata: evil"}},
		{Retry: -time.Second},
		{Retry: 1500 * time.Microsecond},
	} {
		var b bytes.Buffer
		if err := NewWriter(&b).Write(ev); !errors.Is(err, ErrInvalid) || b.Len() > 0 {
			t.Errorf("Write(%+v) = %v, wrote %q", ev, err, b.String())
		}
	}
}

// A 16 MB event is one data line and comes back whole.
func TestHugeEventRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("y"), 16<<20)
	var b bytes.Buffer
	if err := NewWriter(&b).Write(Event{ID: "9", Data: big}); err != nil {
		t.Fatal(err)
	}
	ev, err := NewReader(&b, 0).Next()
	if err != nil || !bytes.Equal(ev.Data, big) || ev.ID != "9" {
		t.Fatalf("round trip: %d bytes, id %q, %v", len(ev.Data), ev.ID, err)
	}
}

// Many short lines add up: an event of empty comments is bounded too.
func TestReaderTooLargeShortLines(t *testing.T) {
	in := strings.Repeat(":\n", 1000) + "\nid: 1\n\n"
	rd := NewReader(strings.NewReader(in), 100)
	if _, err := rd.Next(); !errors.As(err, new(*TooLargeError)) {
		t.Fatalf("got %v, want a TooLargeError", err)
	}
	if ev, err := rd.Next(); err != nil || ev.ID != "1" {
		t.Fatalf("next: %+v %v", ev, err)
	}
}

// flushCounter is a writer with Flush() error, as the relay's writer to
// a client is; it counts the flushes and may fail them.
type flushCounter struct {
	bytes.Buffer
	flushes int
	err     error
}

func (f *flushCounter) Flush() error { f.flushes++; return f.err }

// TestWriterFlushes: a Writer to a writer with Flush() error (held as
// the writer itself, not as a method value) flushes once per event, raw
// or not, and on Flush, and returns the flush's error.
func TestWriterFlushes(t *testing.T) {
	f := &flushCounter{}
	sw := NewWriter(f)
	if err := sw.Write(Event{Name: "message", Data: []byte("{}")}); err != nil || f.flushes != 1 {
		t.Fatalf("Write: %v, %d flushes", err, f.flushes)
	}
	if err := sw.WriteRaw([]byte("data: {}\n\n")); err != nil || f.flushes != 2 {
		t.Fatalf("WriteRaw: %v, %d flushes", err, f.flushes)
	}
	f.err = errors.New("gone")
	if err := sw.Flush(); !errors.Is(err, f.err) || f.flushes != 3 {
		t.Fatalf("Flush: %v, %d flushes", err, f.flushes)
	}
	if got := f.String(); got != "event: message\ndata: {}\n\ndata: {}\n\n" {
		t.Errorf("wrote %q", got)
	}
}

// TestEventName: the event name "message" (taken without a copy) and
// every other name read as they were written.
func TestEventName(t *testing.T) {
	for _, name := range []string{"message", "messages", "messag", "Message", "ping", "méssage"} {
		evs, _ := readAll(t, NewReader(strings.NewReader("event: "+name+"\ndata: 1\n\n"), 1<<10))
		if len(evs) != 1 || evs[0].Name != name {
			t.Errorf("event %q read as %+v", name, evs)
		}
	}
}
