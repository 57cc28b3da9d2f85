package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/mcpproxy/internal/wire/spill"
)

// FuzzReader: the reader never panics on any stream; whatever it reads,
// the writer accepts, and reading the written stream gives the same
// events (so a relay reproduces what it read).
func FuzzReader(f *testing.F) {
	f.Add([]byte("id: 1\ndata: {}\n\n"), uint16(0))
	f.Add([]byte("data: a\ndata: b\r\n\r\n: c\n\nevent: x\nretry: 10\ndata:\n\n"), uint16(0))
	f.Add([]byte("data: a\rdata: b\r\rid: 2\r\r:\r\r"), uint16(8))
	f.Add([]byte("\xEF\xBB\xBFid\ndata\nretry\nevent\n\nid: x\x00\n\n"), uint16(3))
	f.Fuzz(func(t *testing.T, in []byte, max uint16) {
		evs := readEvents(t, in, int64(max))
		var b bytes.Buffer
		w := NewWriter(&b)
		for _, ev := range evs {
			if err := w.Write(ev); err != nil {
				t.Fatalf("the writer refuses what the reader read: %+v: %v", ev, err)
			}
		}
		again := readEvents(t, b.Bytes(), 0)
		if len(again) != len(evs) {
			t.Fatalf("%d events became %d:\n%q", len(evs), len(again), b.Bytes())
		}
		for i := range evs {
			if !reflect.DeepEqual(normal(evs[i]), normal(again[i])) {
				t.Fatalf("event %d = %+v, read back %+v", i, evs[i], again[i])
			}
		}
		// An event passed on as it came (Raw) reads back as itself, alone
		// or after any other.
		rd := NewReader(bytes.NewReader(in), int64(max))
		defer rd.Release()
		var raw bytes.Buffer
		var evs2 []Event
		eachEvent(rd, func(ev Event) {
			evs2 = append(evs2, ev)
			if r := rd.Raw(); r != nil {
				if r[len(r)-1] != '\n' && r[len(r)-1] != '\r' {
					t.Fatalf("raw event %q does not end with a line end", r)
				}
				one := readEvents(t, r, 0)
				if len(one) != 1 || !reflect.DeepEqual(normal(one[0]), normal(ev)) {
					t.Fatalf("raw %q reads as %+v, not %+v", r, one, ev)
				}
				NewWriter(&raw).WriteRaw(r)
			} else {
				NewWriter(&raw).Write(ev)
			}
		})
		again = readEvents(t, raw.Bytes(), 0)
		if len(again) != len(evs2) {
			t.Fatalf("%d events became %d passed on raw:\n%q", len(evs2), len(again), raw.Bytes())
		}
		for i := range evs2 {
			if !reflect.DeepEqual(normal(evs2[i]), normal(again[i])) {
				t.Fatalf("event %d = %+v, passed on raw %+v", i, evs2[i], again[i])
			}
		}
	})
}

// readEvents reads every event, skipping too-large ones, up to the first
// other error.
func readEvents(t *testing.T, in []byte, max int64) []Event {
	var evs []Event
	eachEvent(NewReader(bytes.NewReader(in), max), func(ev Event) {
		if ev.HasData && ev.Data == nil {
			t.Fatal("HasData with nil Data")
		}
		evs = append(evs, ev)
	})
	return evs
}

// eachEvent passes every event rd reads to f, skipping too-large ones,
// up to the first other error.
func eachEvent(rd *Reader, f func(Event)) {
	for {
		ev, err := rd.Next()
		if errors.As(err, new(*TooLargeError)) {
			continue
		}
		if err != nil {
			return
		}
		f(ev)
	}
}

// FuzzRoundTrip: any event the writer accepts reads back the same, its
// line breaks in data as LF.
func FuzzRoundTrip(f *testing.F) {
	f.Add("1", "message", []byte("{\n}"), "ping", int64(1000), uint8(0))
	f.Add("", "", []byte(nil), "", int64(0), uint8(7))
	f.Add("a\nb", "x", []byte("a\r\nb\rc"), "", int64(5), uint8(2))
	f.Fuzz(func(t *testing.T, id, name string, data []byte, comment string, retryMS int64, flags uint8) {
		ev := Event{ID: id, HasID: flags&1 != 0, Name: name, Data: data, HasData: flags&2 != 0,
			Retry: time.Duration(retryMS) * time.Millisecond, HasRetry: flags&4 != 0}
		if flags&8 != 0 {
			ev.Comments = []string{comment, comment}
		}
		var b bytes.Buffer
		if err := NewWriter(&b).Write(ev); err != nil {
			if !errors.Is(err, ErrInvalid) || b.Len() > 0 {
				t.Fatalf("refusal %v wrote %q", err, b.Bytes())
			}
			return
		}
		got := readEvents(t, b.Bytes(), 0)
		want := normal(ev)
		if reflect.DeepEqual(want, Event{}) {
			if len(got) != 0 {
				t.Fatalf("an empty event read back as %+v", got)
			}
			return
		}
		if len(got) != 1 || !reflect.DeepEqual(normal(got[0]), want) {
			t.Fatalf("wrote %+v as %q, read back %+v", ev, b.Bytes(), got)
		}
	})
}

// normal is an event as the wire keeps it: presence flags implied by
// values, data line breaks as LF, a nil slice where there is nothing.
func normal(ev Event) Event {
	ev.HasID = ev.HasID || ev.ID != ""
	ev.HasRetry = ev.HasRetry || ev.Retry != 0
	ev.HasData = ev.HasData || len(ev.Data) > 0
	if ev.HasData {
		d := strings.ReplaceAll(string(ev.Data), "\r\n", "\n")
		ev.Data = []byte(strings.ReplaceAll(d, "\r", "\n"))
	} else {
		ev.Data = nil
	}
	if len(ev.Comments) == 0 {
		ev.Comments = nil
	}
	return ev
}

// FuzzSpool: reading through a Spooler (from after+1 bytes of data on)
// gives the events read without one, each one's data back byte for byte
// once expanded; only an event whose data is not JSON is dropped, with a
// reason.
func FuzzSpool(f *testing.F) {
	f.Add([]byte("id: 1\ndata: {\"a\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}\n\n"), uint8(4))
	f.Add([]byte("data: [1,\ndata: \"yyyyyyyyyyyyyyyyyyyyyyyyyyy\"]\r\n\r\n: c\n\ndata: not json at all\n\ndata: {}\n\n"), uint8(2))
	f.Add([]byte("data: {\"t\":\"\\u00e9\\ud83d\\ude00\\\"\\\\ zzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\"}\n\nid: 2\ndata: \"q\n\n"), uint8(0))
	f.Fuzz(func(t *testing.T, in []byte, after uint8) {
		sp, err := spill.New(spill.Options{Dir: t.TempDir(), Threshold: 8})
		if err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		plain := readEvents(t, in, 1<<20)
		rd := NewReader(bytes.NewReader(in), 1<<20)
		rd.Spool(sp)
		rd.spillAfter = int(after) + 1
		for i := 0; ; i++ {
			ev, err := rd.Next()
			var big *TooLargeError
			if errors.As(err, &big) {
				if i >= len(plain) || json.Valid(plain[i].Data) || big.Err == nil {
					t.Fatalf("event %d dropped: %v (plain: %d events)", i, err, len(plain))
				}
				continue
			}
			if err != nil {
				if i != len(plain) {
					t.Fatalf("%d events read through the spooler, %d without", i, len(plain))
				}
				return
			}
			if i >= len(plain) {
				t.Fatalf("more events through the spooler than without")
			}
			var b bytes.Buffer
			if err := spill.Expand(&b, ev.Data); err != nil {
				t.Fatal(err)
			}
			ev.Data = b.Bytes()
			if !reflect.DeepEqual(normal(ev), normal(plain[i])) {
				t.Fatalf("event %d = %+v, without a spooler %+v", i, ev, plain[i])
			}
		}
	})
}
