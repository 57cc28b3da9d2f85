package binframe

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestStreamID(t *testing.T) {
	id := NewStreamID()
	s := id.String()
	if len(s) != 36 || s[14] != '4' || !strings.ContainsRune("89ab", rune(s[19])) {
		t.Errorf("not a v4 UUID: %s", s)
	}
	if back, ok := ParseStreamID(strings.ToUpper(s)); !ok || back != id {
		t.Errorf("ParseStreamID(%s) = %v, %v", s, back, ok)
	}
	for _, bad := range []string{"", "550e8400e29b41d4a716446655440000", "550e8400-e29b-41d4-a716-44665544000g", "550e8400-e29b-41d4-a716_446655440000"} {
		if _, ok := ParseStreamID(bad); ok {
			t.Errorf("ParseStreamID(%q) ok", bad)
		}
	}
	if NewStreamID() == id {
		t.Error("two stream ids alike")
	}
}

// A frame reads back as written; a reader that ends early is ErrShort; a
// size over the reader's limit is refused before any byte.
func TestFrame(t *testing.T) {
	id := NewStreamID()
	var b bytes.Buffer
	if err := WriteFrame(&b, id, 5, strings.NewReader("hello and more")); err != nil {
		t.Fatal(err)
	}
	if b.Len() != HeaderLen+5 {
		t.Fatalf("frame of %d bytes", b.Len())
	}
	gotID, size, err := ReadFrameHeader(&b, 100)
	if err != nil || gotID != id || size != 5 || b.String() != "hello" {
		t.Errorf("read %v %d %v, rest %q", gotID, size, err, b.String())
	}
	if err := WriteFrame(io.Discard, id, 10, strings.NewReader("short")); !errors.Is(err, ErrShort) {
		t.Errorf("short reader: %v", err)
	}
	b.Reset()
	WriteFrame(&b, id, 5, strings.NewReader("hello"))
	if _, _, err := ReadFrameHeader(&b, 4); err == nil {
		t.Error("a frame over the limit was read")
	}
}

// A body of messages and binary parts parses back with the standard
// library's multipart reader: each message whole with its event id, each
// binary part's bytes with its Content-ID, type and length.
func TestMultipart(t *testing.T) {
	var b bytes.Buffer
	mp := NewMultipart(&b)
	id := NewStreamID()
	data := bytes.Repeat([]byte{0, 1, 2, 0xff, '\r', '\n', '-'}, 100_000)
	if err := mp.Message([]byte(`{"jsonrpc":"2.0","id":1,"result":{}}`), "7"); err != nil {
		t.Fatal(err)
	}
	if err := mp.Binary(id, "image/png\r\nX-Evil: 1", int64(len(data)), bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if err := mp.Close(); err != nil {
		t.Fatal(err)
	}
	parts := readAll(t, &b, mp.ContentType())
	if len(parts) != 2 || parts[0].body != `{"jsonrpc":"2.0","id":1,"result":{}}` || parts[0].event != "7" {
		t.Fatalf("parts: %+v", parts)
	}
	if p := parts[1]; p.id != id || p.mime != "application/octet-stream" || sha256.Sum256([]byte(p.body)) != sha256.Sum256(data) || p.length != "700000" {
		t.Errorf("binary part: id %v mime %q length %s, %d bytes", p.id, p.mime, p.length, len(p.body))
	}
	if _, err := NewReader(&b, "multipart/form-data; boundary=x"); err == nil {
		t.Error("form-data accepted")
	}
}

type part struct {
	body, mime, event, length string
	id                        StreamID
	hasID                     bool
}

// readAll parses a multipart body with NewReader.
func readAll(t testing.TB, body io.Reader, ct string) []part {
	t.Helper()
	mr, err := NewReader(body, ct)
	if err != nil {
		t.Fatal(err)
	}
	var out []part
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			t.Fatal(err)
		}
		id, ok := ContentID(p.Header)
		out = append(out, part{body: string(b), mime: p.Header.Get("Content-Type"), event: p.Header.Get(HeaderEventID),
			length: p.Header.Get("Content-Length"), id: id, hasID: ok})
	}
}

// FuzzMultipart: whatever the message, event id, media type and bytes, the
// body the writer makes parses back to them (a media type or event id a
// header cannot carry is replaced or left out, never injected).
func FuzzMultipart(f *testing.F) {
	f.Add([]byte(`{"a":1}`), "1", "image/png", []byte("\x89PNG\r\n--x--\r\n"))
	f.Add([]byte(`{}`), "a\r\nb", "text/plain; charset=\"utf-8\"", []byte{})
	f.Fuzz(func(t *testing.T, msg []byte, event, mt string, data []byte) {
		var b bytes.Buffer
		mp := NewMultipart(&b)
		id := NewStreamID()
		if err := mp.Message(msg, event); err != nil {
			t.Skip() // a spelt marker that does not resolve
		}
		if err := mp.Binary(id, mt, int64(len(data)), bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		mp.Close()
		parts := readAll(t, &b, mp.ContentType())
		if len(parts) != 2 || parts[0].body != string(msg) || parts[1].body != string(data) || parts[1].id != id || !parts[1].hasID {
			t.Fatalf("parts %+v", parts)
		}
		if parts[0].event != "" && parts[0].event != event {
			t.Errorf("event id %q, wrote %q", parts[0].event, event)
		}
		if strings.ContainsAny(parts[1].mime, "\r\n") {
			t.Errorf("media type %q", parts[1].mime)
		}
	})
}

// FuzzFrame: frames read back as written, whatever their bytes; any input
// read as a frame header is bounded by the limit.
func FuzzFrame(f *testing.F) {
	f.Add([]byte("abc"), []byte{})
	f.Add([]byte{}, bytes.Repeat([]byte{0xff}, 24))
	f.Fuzz(func(t *testing.T, data, junk []byte) {
		id := NewStreamID()
		var b bytes.Buffer
		WriteFrame(&b, id, int64(len(data)), bytes.NewReader(data))
		b.Write(junk)
		gotID, size, err := ReadFrameHeader(&b, 1<<20)
		if err != nil || gotID != id || size != int64(len(data)) || !bytes.Equal(b.Next(int(size)), data) {
			t.Fatalf("frame read back as %v %d %v", gotID, size, err)
		}
		if _, n, err := ReadFrameHeader(bytes.NewReader(junk), 1000); err == nil && n > 1000 {
			t.Errorf("size %d over the limit", n)
		}
	})
}

// FuzzStreamID: a parsed id prints back as the input, lowercased.
func FuzzStreamID(f *testing.F) {
	f.Add(NewStreamID().String())
	f.Add("550E8400-E29B-41D4-A716-446655440000")
	f.Fuzz(func(t *testing.T, s string) {
		if id, ok := ParseStreamID(s); ok && id.String() != strings.ToLower(s) {
			t.Errorf("%q read as %s", s, id)
		}
	})
}
