package preview

import (
	"bytes"
	"path"
	"strings"
	"unicode/utf8"
)

// bom is UTF-8's byte order mark, which some tools (Excel's CSV export)
// put first.
const bom = "\xef\xbb\xbf"

// magic is a signature at an offset and what it means.
type magic struct {
	off    int
	sig    string
	kind   string
	format string
}

// magics are checked in order; content decides over declared types.
var magics = []magic{
	{0, "\x89PNG\r\n\x1a\n", KindImage, "png"},
	{0, "\xff\xd8\xff", KindImage, "jpeg"},
	{0, "GIF87a", KindImage, "gif"},
	{0, "GIF89a", KindImage, "gif"},
	{8, "WEBP", KindImage, "webp"},
	{0, "BM", KindImage, "bmp"},
	{8, "WAVE", KindAudio, "wav"},
	{0, "ID3", KindAudio, "mp3"},
	{0, "OggS", KindAudio, "ogg"},
	{0, "fLaC", KindAudio, "flac"},
	{4, "ftypM4A", KindAudio, "m4a"},
	{4, "ftyp", KindBinary, "mp4"},
	{0, "%PDF-", KindBinary, "pdf"},
	{0, "PK\x03\x04", KindBinary, "zip"},
	{0, "PK\x05\x06", KindBinary, "zip"},
	{0, "\x1f\x8b", KindBinary, "gzip"},
	{0, "BZh", KindBinary, "bzip2"},
	{0, "\xfd7zXZ\x00", KindBinary, "xz"},
	{0, "\x28\xb5\x2f\xfd", KindBinary, "zstd"},
	{0, "7z\xbc\xaf\x27\x1c", KindBinary, "7z"},
	{257, "ustar", KindBinary, "tar"},
	{0, "\x7fELF", KindBinary, "elf"},
	{0, "MZ", KindBinary, "exe"},
	{0, "\x00asm", KindBinary, "wasm"},
	{0, "SQLite format 3\x00", KindBinary, "sqlite"},
	{0, "PAR1", KindBinary, "parquet"},
	{0, "ARROW1", KindBinary, "arrow"},
}

// sniff decides the kind from the head (the first sniffSize bytes, or
// all of them when complete) and the declared type, and returns the
// analyzer for the rest.
func sniff(head []byte, complete bool, o Options) (string, analyzer) {
	if len(head) == 0 {
		return KindEmpty, emptyAn{}
	}
	if kind, an := sniffMagic(head, o); an != nil {
		return kind, an
	}
	if !isText(head, complete) {
		return KindBinary, &binAn{head: head}
	}
	text := bytes.TrimPrefix(head, []byte(bom))
	trimmed := bytes.TrimLeft(text, " \t\r\n")
	mime, _, _ := strings.Cut(strings.ToLower(o.MimeType), ";")
	mime = strings.TrimSpace(mime)
	ext := strings.ToLower(path.Ext(o.Name))
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		probe := newJSON()
		probe.write(text)
		if probe.err == "" {
			return KindJSON, newJSON()
		}
	}
	if mime == "text/html" || ext == ".html" || ext == ".htm" || hasPrefixFold(trimmed, "<!doctype html") || hasPrefixFold(trimmed, "<html") {
		return KindHTML, &htmlAn{}
	}
	declared := byte(0)
	switch {
	case mime == "text/tab-separated-values" || ext == ".tsv":
		declared = '\t'
	case mime == "text/csv" || ext == ".csv":
		declared = ','
	}
	if d := sniffDelim(text, complete, declared != 0); d != 0 {
		return delimited(d)
	}
	if declared != 0 {
		return delimited(declared)
	}
	if mime == "text/markdown" || ext == ".md" || ext == ".markdown" || looksMarkdown(text) {
		return KindMarkdown, &lineAn{md: true}
	}
	if kind, an := sniffBehindBanner(text, complete); an != nil {
		return kind, an
	}
	return KindText, &lineAn{}
}

// sniffMagic recognises an image, audio or other binary format by its
// signature at the start of head; an is nil if none matches.
func sniffMagic(head []byte, o Options) (kind string, an analyzer) {
	for _, m := range magics {
		if len(head) >= m.off+len(m.sig) && string(head[m.off:m.off+len(m.sig)]) == m.sig {
			if m.sig == "BM" && len(head) < 26 {
				continue
			}
			switch m.kind {
			case KindImage:
				return KindImage, &imageAn{format: m.format, o: o}
			case KindAudio:
				return KindAudio, &binAn{format: m.format, head: head}
			}
			return KindBinary, &binAn{format: m.format, head: head, nested: o.nested}
		}
	}
	return "", nil
}

// delimited is the kind and analyser of text whose fields are
// separated by d: TSV for a tab, CSV for the rest.
func delimited(d byte) (string, analyzer) {
	if d == '\t' {
		return KindTSV, newCSV(d)
	}
	return KindCSV, newCSV(d)
}

func hasPrefixFold(b []byte, p string) bool {
	return len(b) >= len(p) && strings.EqualFold(string(b[:len(p)]), p)
}

// isText reports whether b is UTF-8 without NUL bytes; when the head may
// continue, a character cut at its end is allowed.
func isText(b []byte, complete bool) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return false
	}
	if utf8.Valid(b) {
		return true
	}
	if complete {
		return false
	}
	for cut := 1; cut <= 3 && cut < len(b); cut++ {
		if utf8.Valid(b[:len(b)-cut]) {
			return true
		}
	}
	return false
}

// looksMarkdown: the first non-blank line is a heading, or several lines
// are.
func looksMarkdown(b []byte) bool {
	headings, first := 0, true
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte("\n"))
		line = bytes.TrimRight(line, "\r")
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if level, _ := heading(string(line)); level > 0 {
			if first {
				return true
			}
			headings++
		}
		first = false
	}
	return headings >= 2
}

// heading parses an ATX heading: its level and text.
func heading(line string) (int, string) {
	n := 0
	for n < len(line) && n < 7 && line[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n >= len(line) || line[n] != ' ' {
		return 0, ""
	}
	return n, strings.TrimSpace(strings.TrimRight(strings.TrimSpace(line[n:]), "#"))
}

// sniffDelim finds the delimiter that splits the first records into the
// same number (two or more) of short fields. lenient accepts two records
// (the type was declared).
func sniffDelim(b []byte, complete, lenient bool) byte {
	best, bestN := byte(0), 0
	for _, d := range []byte{',', '\t', ';', '|'} {
		if d == '|' && len(b) > 0 && b[0] == '|' {
			continue // a Markdown table
		}
		recs := splitRecords(b, d, 20, complete)
		need := 3
		if lenient {
			need = 2
		}
		if len(recs) < need {
			continue
		}
		n := recs[0]
		ok := n.fields >= 2 && n.maxLen <= 100
		for _, r := range recs[1:] {
			if r.fields != n.fields {
				ok = false
			}
		}
		if ok && n.fields > bestN {
			best, bestN = d, n.fields
		}
	}
	return best
}

type recShape struct{ fields, maxLen int }

// splitRecords parses up to max records quote-aware and returns their
// shapes (at most limit); a record cut by the end of an incomplete head is left out.
func splitRecords(b []byte, d byte, limit int, complete bool) []recShape {
	var out []recShape
	inQ, fields, flen, maxLen := false, 1, 0, 0
	for i := 0; i < len(b) && len(out) < limit; i++ {
		c := b[i]
		switch {
		case inQ:
			if c == '"' {
				if i+1 < len(b) && b[i+1] == '"' {
					i++
				} else {
					inQ = false
				}
			}
			flen++
		case c == '"' && flen == 0:
			inQ = true
		case c == d:
			fields++
			maxLen = max(maxLen, flen)
			flen = 0
		case c == '\n':
			maxLen = max(maxLen, flen)
			if fields > 1 || flen > 0 {
				out = append(out, recShape{fields, maxLen})
			}
			fields, flen, maxLen = 1, 0, 0
		case c == '\r':
		default:
			flen++
		}
	}
	if complete && !inQ && (fields > 1 || flen > 0) && len(out) < limit {
		out = append(out, recShape{fields, max(maxLen, flen)})
	}
	return out
}

// emptyAn previews no bytes.
type emptyAn struct{}

func (emptyAn) write([]byte) {}
func (emptyAn) finish(*Preview) []section {
	return []section{{prioHead, "Empty (0 bytes)."}}
}
