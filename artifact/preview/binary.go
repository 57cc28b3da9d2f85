package preview

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// tailSize is how much of a binary's end is kept: a zip's central
// directory and a gzip's length are there.
const tailSize = 64 << 10

// binAn previews audio and other binaries from their head and tail: the
// type by magic number, what the headers tell (a WAV's format and
// duration, a PDF's version and pages, a zip's entries, a gzip's name and
// length), and the size.
type binAn struct {
	format string
	head   []byte // the sniffed head, not copied
	tail   []byte // the last bytes, at most 2*tailSize held
	pages  int64  // PDF page objects seen
	carry  []byte // the end of the last write, for matches across writes
	nested bool   // a compressed file's content: a gzip in it is not opened
}

func (b *binAn) write(p []byte) {
	switch b.format {
	case "zip", "gzip":
		b.tail = append(b.tail, p...)
		if len(b.tail) > 2*tailSize {
			b.tail = append(b.tail[:0], b.tail[len(b.tail)-tailSize:]...)
		}
	case "pdf":
		b.countPages(p)
	}
}

// sated reports whether write ignores what comes next: only a zip's,
// gzip's or PDF's body is read past the head.
func (b *binAn) sated() bool { return b.format != "zip" && b.format != "gzip" && b.format != "pdf" }

// countPages counts "/Type /Page" dictionary entries (not /Pages),
// including one cut by a write boundary, once.
func (b *binAn) countPages(p []byte) {
	buf := append(b.carry, p...)
	for i := 0; ; {
		j := bytes.Index(buf[i:], []byte("/Type"))
		if j < 0 {
			break
		}
		k := i + j + len("/Type")
		for k < len(buf) && k-(i+j+len("/Type")) < 16 && isWS(buf[k]) {
			k++
		}
		// The byte after "/Page" ends the match: it must be there, not
		// a letter, and new (a match within the carry was counted).
		if bytes.HasPrefix(buf[k:], []byte("/Page")) && k+5 < len(buf) && !isLetter(buf[k+5]) && k+5 >= len(b.carry) {
			b.pages++
		}
		i += j + 1
	}
	keep := min(len(buf), 40)
	b.carry = append(b.carry[:0], buf[len(buf)-keep:]...)
}

// end returns the last tailSize bytes read.
func (b *binAn) end() []byte { return b.tail[max(0, len(b.tail)-tailSize):] }

var formatNames = map[string]string{
	"wav": "WAV audio", "mp3": "MP3 audio", "ogg": "Ogg audio", "flac": "FLAC audio", "m4a": "M4A audio",
	"mp4": "MP4 video", "pdf": "PDF document", "zip": "zip archive (also docx, xlsx, jar...)",
	"gzip": "gzip-compressed data", "bzip2": "bzip2-compressed data", "xz": "xz-compressed data",
	"zstd": "zstd-compressed data", "7z": "7z archive", "tar": "tar archive", "elf": "ELF executable",
	"exe": "Windows executable", "wasm": "WebAssembly module", "sqlite": "SQLite database",
	"parquet": "Parquet file", "arrow": "Arrow IPC file",
}

func (b *binAn) finish(pv *Preview) []section {
	f := &pv.Facts
	f.Format = b.format
	name := formatNames[b.format]
	if name == "" {
		name = "Binary data of unknown type"
	}
	detail := b.details(f)
	s := fmt.Sprintf("%s, %s", name, humanSize(f.Size))
	if len(detail) > 0 {
		s += ", " + strings.Join(detail, ", ")
	}
	secs := []section{{prioHead, s + ".\n"}}
	if b.format == "gzip" && !b.nested {
		secs = append(secs, gzipContent(b.head, gzipName(b.head))...)
	}
	return secs
}

// details are what the header (and end) of a file of a known format tell
// beyond its kind and size: an audio file's channels, rate and length
// (also set in f), a PDF's version and pages, an archive's entries, a
// gzip file's name and uncompressed size; an unknown format's first
// bytes.
func (b *binAn) details(f *Facts) []string {
	var detail []string
	switch b.format {
	case "wav":
		if w, ok := parseWAV(b.head); ok {
			f.Channels, f.SampleRate, f.Seconds = w.channels, w.rate, w.seconds(f.Size)
			detail = append(detail, w.String(f.Size))
		}
	case "flac":
		if ch, rate, secs, ok := parseFLAC(b.head); ok {
			f.Channels, f.SampleRate, f.Seconds = ch, rate, secs
			detail = append(detail, fmt.Sprintf("%d ch, %d Hz, %.1f s", ch, rate, secs))
		}
	case "pdf":
		if v, _, ok := bytes.Cut(b.head[5:], []byte("\n")); ok && len(v) <= 8 {
			detail = append(detail, "version "+strings.TrimSpace(string(v)))
		}
		if b.pages > 0 {
			detail = append(detail, plural(b.pages, "page"))
		}
	case "zip":
		if z, ok := parseZipEnd(b.end(), f.Size); ok {
			detail = append(detail, z.String())
		} else if n := zipFirstName(b.head); n != "" {
			detail = append(detail, fmt.Sprintf("first entry %q", n))
		}
	case "gzip":
		detail = b.gzipDetails(f.Size)
	case "":
		if len(b.head) > 0 {
			detail = append(detail, fmt.Sprintf("starts %x", b.head[:min(8, len(b.head))]))
		}
	}
	return detail
}

// gzipDetails are a gzip file's name, if its header has one, and its
// uncompressed size as its trailer holds it (modulo 4 GiB: past 100 MiB
// compressed, it may have wrapped). size is the file's size.
func (b *binAn) gzipDetails(size int64) []string {
	var detail []string
	if name := gzipName(b.head); name != "" {
		detail = append(detail, fmt.Sprintf("of %q", name))
	}
	if t := b.end(); len(t) >= 4 && size >= 18 {
		s := fmt.Sprintf("%s uncompressed", humanSize(int64(binary.LittleEndian.Uint32(t[len(t)-4:]))))
		if size >= 100<<20 {
			s += " (modulo 4 GiB)"
		}
		detail = append(detail, s)
	}
	return detail
}

// wavInfo is what a WAV header says.
type wavInfo struct {
	format, channels, rate, bits int
	byteRate                     int
	data                         int64 // bytes of samples, -1 if unknown
}

func (w wavInfo) seconds(size int64) float64 {
	if w.byteRate <= 0 {
		return 0
	}
	d := w.data
	if d < 0 || d > size {
		d = size // a stream writer's placeholder size: estimate from the file
	}
	return float64(d) / float64(w.byteRate)
}

func (w wavInfo) String(size int64) string {
	enc := map[int]string{1: "PCM", 3: "float", 6: "A-law", 7: "µ-law", 0xfffe: "extensible"}[w.format]
	if enc == "" {
		enc = fmt.Sprintf("format %d", w.format)
	}
	return fmt.Sprintf("%s %d-bit, %d ch, %d Hz, %.2f s", enc, w.bits, w.channels, w.rate, w.seconds(size))
}

// parseWAV reads the RIFF chunks of a WAV head, at most 64 of them.
func parseWAV(b []byte) (wavInfo, bool) {
	w := wavInfo{data: -1}
	if len(b) < 12 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return w, false
	}
	fmtSeen := false
	p := 12
	for n := 0; n < 64 && p+8 <= len(b); n++ {
		id, size := string(b[p:p+4]), int64(binary.LittleEndian.Uint32(b[p+4:p+8]))
		body := b[p+8:]
		switch id {
		case "fmt ":
			if len(body) < 16 {
				return w, false
			}
			w.format = int(binary.LittleEndian.Uint16(body[0:]))
			w.channels = int(binary.LittleEndian.Uint16(body[2:]))
			w.rate = int(binary.LittleEndian.Uint32(body[4:]))
			w.byteRate = int(binary.LittleEndian.Uint32(body[8:]))
			w.bits = int(binary.LittleEndian.Uint16(body[14:]))
			fmtSeen = true
		case "data":
			if size != 0xffffffff && size != 0 {
				w.data = size
			}
			return w, fmtSeen
		}
		next := int64(p) + 8 + size + size%2
		if next > int64(len(b)) {
			break
		}
		p = int(next)
	}
	return w, fmtSeen
}

// parseFLAC reads the STREAMINFO block that follows "fLaC".
func parseFLAC(b []byte) (channels, rate int, secs float64, ok bool) {
	if len(b) < 8+34 || b[4]&0x7f != 0 {
		return 0, 0, 0, false
	}
	si := b[8:]
	rate = int(si[10])<<12 | int(si[11])<<4 | int(si[12])>>4
	channels = int(si[12]>>1&0x7) + 1
	total := uint64(si[13]&0xf)<<32 | uint64(binary.BigEndian.Uint32(si[14:18]))
	if rate == 0 {
		return 0, 0, 0, false
	}
	return channels, rate, float64(total) / float64(rate), true
}

// zipFirstName reads the file name of the first local header.
func zipFirstName(b []byte) string {
	if len(b) < 30 || string(b[:4]) != "PK\x03\x04" {
		return ""
	}
	n := int(binary.LittleEndian.Uint16(b[26:28]))
	if 30+n > len(b) || n > 200 {
		return ""
	}
	return strings.ToValidUTF8(string(b[30:30+n]), "?")
}

// zipEnd is what a zip's end of central directory, and the directory if
// it is in the tail, say.
type zipEnd struct {
	entries int
	names   []string
	size    int64 // uncompressed bytes of the listed entries
	listed  int
}

func (z zipEnd) String() string {
	s := plural(int64(z.entries), "entry")
	if z.listed == z.entries && z.entries > 0 {
		s += fmt.Sprintf(", %s uncompressed", humanSize(z.size))
	}
	if len(z.names) > 0 {
		s += ": " + strings.Join(z.names, ", ")
		if z.entries > len(z.names) {
			s += ", …"
		}
	}
	return s
}

// parseZipEnd finds the end of central directory record in tail (the
// last bytes of a file of size bytes) and reads the directory's first
// entries when it lies in the tail.
func parseZipEnd(tail []byte, size int64) (zipEnd, bool) {
	var z zipEnd
	i := bytes.LastIndex(tail, []byte("PK\x05\x06"))
	if i < 0 || len(tail)-i < 22 {
		return z, false
	}
	e := tail[i:]
	z.entries = int(binary.LittleEndian.Uint16(e[10:]))
	cdSize, cdOff := int64(binary.LittleEndian.Uint32(e[12:])), int64(binary.LittleEndian.Uint32(e[16:]))
	start := int64(len(tail)) - (size - cdOff) // the directory's offset in tail
	if start < 0 || start > int64(i) || cdSize > int64(i)-start {
		return z, true
	}
	d := tail[start : start+cdSize]
	for len(d) >= 46 && string(d[:4]) == "PK\x01\x02" && z.listed < 1000 {
		nl, xl, cl := int(binary.LittleEndian.Uint16(d[28:])), int(binary.LittleEndian.Uint16(d[30:])), int(binary.LittleEndian.Uint16(d[32:]))
		if 46+nl+xl+cl > len(d) {
			break
		}
		z.size += int64(binary.LittleEndian.Uint32(d[24:]))
		if len(z.names) < 10 {
			z.names = append(z.names, strings.ToValidUTF8(clip(string(d[46:46+nl]), 80), "?"))
		}
		z.listed++
		d = d[46+nl+xl+cl:]
	}
	return z, true
}

// gzipName reads the original file name of a gzip header, if any.
func gzipName(b []byte) string {
	if len(b) < 10 || b[3]&0x08 == 0 {
		return ""
	}
	p := b[10:]
	if b[3]&0x04 != 0 { // FEXTRA
		if len(p) < 2 {
			return ""
		}
		n := int(binary.LittleEndian.Uint16(p))
		if 2+n > len(p) {
			return ""
		}
		p = p[2+n:]
	}
	end := bytes.IndexByte(p, 0)
	if end < 0 || end > 255 {
		return ""
	}
	return strings.ToValidUTF8(string(p[:end]), "?")
}

// gzipHeadMax bounds what a gzip's preview decompresses: the first 256
// KiB of its content, inflated from at most its first sniffSize (64 KiB)
// compressed bytes. A decompression bomb (1000:1 and more) costs that
// much memory and the time to inflate it, and no more.
const gzipHeadMax = 256 << 10

// gunzipHead inflates the first member of the gzip stream at the start of
// b, up to gzipHeadMax bytes; whole reports that this is all of its
// content, its checksum verified.
func gunzipHead(b []byte) (content []byte, whole bool) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, false
	}
	zr.Multistream(false)
	content, err = io.ReadAll(io.LimitReader(zr, gzipHeadMax+1))
	if len(content) > gzipHeadMax {
		return content[:gzipHeadMax], false
	}
	return content, err == nil || errors.Is(err, io.EOF)
}

// gzipContent previews what a gzip holds, from its head: the sections of
// its decompressed content's own preview (a CSV's columns and rows, a
// log's lines), under a line that says how much of it they cover.
func gzipContent(head []byte, name string) []section {
	content, whole := gunzipHead(head)
	if len(content) == 0 {
		return nil
	}
	cover := "whole"
	if !whole {
		// A record or line cut by the end is no part of the preview.
		if i := bytes.LastIndexByte(content, '\n'); i > 0 {
			content = content[:i+1]
		}
		cover = "its first " + humanSize(int64(len(content))) + " only"
	}
	inner := New(Options{Name: name, nested: true})
	inner.Write(content)
	ipv, secs := inner.sections()
	out := []section{{prioFacts, fmt.Sprintf("Its content, decompressed (%s), is %s:\n", cover, kindName(ipv.Kind))}}
	for _, s := range secs {
		// The content's own figures rank under the gzip's line, and
		// keep their order among themselves.
		out = append(out, section{min(s.prio, prioFacts-1), s.text})
	}
	return out
}

// kindName names a Kind in a sentence.
func kindName(kind string) string {
	switch kind {
	case KindJSON, KindNDJSON, KindCSV, KindTSV, KindHTML:
		return strings.ToUpper(kind)
	case KindMarkdown:
		return "Markdown"
	case KindEmpty:
		return "empty"
	}
	return kind + " data"
}
