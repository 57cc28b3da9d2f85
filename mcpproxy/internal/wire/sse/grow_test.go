package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// drainSpooler is a Spooler that takes any data and keeps "{}" of it.
type drainSpooler struct{ n int64 }

func (d *drainSpooler) Read(r io.Reader, _ int64) ([]byte, error) {
	n, err := io.Copy(io.Discard, r)
	d.n += n
	return []byte("{}"), err
}

// A Reader reads a spooled event's data in 256 KiB steps, and gives that
// buffer back between events once what it holds unread fits its own: the
// next events are read from its own 32 KiB again, their bytes as they
// came, and a long-lived stream that carried one big event does not keep
// the big buffer (before shrink it kept it until Release). The second
// round has an event of 40 KiB after the big one: more than the small
// buffer holds is unread when the big event ends, and the buffer goes back
// one event later (when shrink ran only at a spooled event's end, it was
// kept for good).
func TestReaderBufferShrinks(t *testing.T) {
	data := strings.Repeat("x", 600<<10)
	mid := "data: \"" + strings.Repeat("m", 40<<10) + "\"\n\n"
	small := "id: 2\ndata: {\"b\":2}\n\n"
	// Each big event's data ends a read, so the next read brings what
	// follows it at once.
	rd := NewReader(io.MultiReader(strings.NewReader("data: "+data), strings.NewReader("\n\n"+small),
		strings.NewReader("data: "+data), strings.NewReader("\n\n"+mid+small)), 0)
	defer rd.Release()
	sp := &drainSpooler{}
	rd.Spool(sp)
	for i := range 2 {
		ev, err := rd.Next()
		if err != nil || string(ev.Data) != "{}" || sp.n != int64(len(data)*(i+1)) {
			t.Fatalf("big event %d: %q, %v; the Spooler read %d bytes", i, ev.Data, err, sp.n)
		}
		if i == 1 {
			if ev, err := rd.Next(); err != nil || len(ev.Data) != 40<<10+2 {
				t.Fatalf("40 KiB event after big event %d: %d bytes, %v", i, len(ev.Data), err)
			}
		}
		ev, err = rd.Next()
		if err != nil || string(ev.Data) != `{"b":2}` || string(rd.Raw()) != small {
			t.Fatalf("small event after big event %d: %q, %v, raw %q", i, ev.Data, err, rd.Raw())
		}
		if rd.big != nil || len(rd.buf) != readBufSize {
			t.Errorf("after the events that followed big event %d the Reader keeps a %d-byte buffer (big: %v), want its own %d", i, len(rd.buf), rd.big != nil, readBufSize)
		}
	}
	if _, err := rd.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("end: %v", err)
	}
}
