package sse

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

// benchEvents is a stream of n events as an MCP server sends them: an id,
// the "message" name and one line of JSON data of about size bytes.
func benchEvents(n, size int) []byte {
	data := `{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"` +
		strings.Repeat("0123456789 ", size/11) + `"}]}}`
	var b bytes.Buffer
	for i := range n {
		b.WriteString("id: " + strconv.Itoa(i) + "\nevent: message\ndata: " + data + "\n\n")
	}
	return b.Bytes()
}

// BenchmarkReader reads small events (1 KB of data, the common case) and
// large ones (1 MB, past the Reader's buffer), and events of many short
// data lines with CRLF line ends.
func BenchmarkReader(b *testing.B) {
	lines := strings.Repeat("data: "+strings.Repeat("x", 60)+"\r\n", 100) + "\r\n"
	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"small", benchEvents(1000, 1<<10)},
		{"large", benchEvents(4, 1<<20)},
		{"lines", []byte(strings.Repeat(lines, 200))},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.in)))
			b.ReportAllocs()
			for b.Loop() {
				rd := NewReader(bytes.NewReader(c.in), 0)
				for {
					if _, err := rd.Next(); err != nil {
						if !errors.Is(err, io.EOF) {
							b.Fatal(err)
						}
						break
					}
				}
				rd.Release()
			}
		})
	}
}

// BenchmarkWriter writes events of 1 KB of data, and of 1 MB (which goes
// out without a second copy), each flushed.
func BenchmarkWriter(b *testing.B) {
	for _, c := range []struct {
		name string
		size int
	}{{"small", 1 << 10}, {"large", 1 << 20}} {
		data := []byte(`{"jsonrpc":"2.0","id":12,"result":{"content":[{"type":"text","text":"` +
			strings.Repeat("0123456789 ", c.size/11) + `"}]}}`)
		ev := Event{ID: "42", HasID: true, Name: "message", Data: data, HasData: true}
		b.Run(c.name, func(b *testing.B) {
			w := NewWriter(io.Discard)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.Write(ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
