package ndjson

import (
	"bytes"
	"testing"
)

// BenchmarkReaderSmall reads small messages (a tools/call result of 1 KB),
// held and spooled.
func BenchmarkReaderSmall(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"` + string(bytes.Repeat([]byte("0123456789 "), 90)) + `"}]}}` + "\n")
	in := bytes.Repeat(line, 1000)
	for _, spooled := range []bool{false, true} {
		b.Run(map[bool]string{false: "held", true: "spooled"}[spooled], func(b *testing.B) {
			s := newSpooler(b, 0)
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				r := NewReader(bytes.NewReader(in), 0)
				if spooled {
					r = NewSpoolingReader(bytes.NewReader(in), 0, s)
				}
				for range 1000 {
					if _, err := r.Read(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
