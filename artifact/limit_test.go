package artifact

import "testing"

// However many fetches are stuck on clients that do not read, at most
// maxBigBufs of them hold a 512 KiB buffer; the rest get 32 KiB ones, and
// a released big buffer is available again.
func TestCopyBuffersBounded(t *testing.T) {
	var releases []func()
	big := 0
	for range 3 * maxBigBufs {
		b, release := copyBuffer()
		if len(b) == 512<<10 {
			big++
		} else if len(b) != 32<<10 {
			t.Fatalf("buffer of %d bytes", len(b))
		}
		releases = append(releases, release)
	}
	if big != maxBigBufs {
		t.Errorf("%d big buffers out at once, want %d", big, maxBigBufs)
	}
	for _, r := range releases {
		r()
	}
	if b, release := copyBuffer(); len(b) != 512<<10 {
		t.Errorf("after release: a %d-byte buffer, want a big one", len(b))
	} else {
		release()
	}
}
