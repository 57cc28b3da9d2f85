package offload

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// IsText reports whether a mime type names text a model can read as is
// (text/*, JSON, XML, NDJSON); parameters are ignored.
func IsText(mime string) bool {
	mime, _, _ = strings.Cut(mime, ";")
	return strings.HasPrefix(mime, "text/") || mime == "application/json" ||
		strings.HasSuffix(mime, "+json") || mime == "application/xml" || mime == "application/x-ndjson"
}

// sniffSize is how much of a text sniffText reads: a text may be 100 MB
// spilled to disk, so its type is told from its first kilobytes. A head
// shorter than this is the whole text.
const sniffSize = 4096

// sniffText guesses a text item's mime type from its first bytes.
func sniffText(text io.Reader) string {
	head := make([]byte, sniffSize)
	n, _ := io.ReadFull(text, head)
	if c, ok := text.(io.Closer); ok {
		c.Close()
	}
	return mimeOfHead(head[:n])
}

// mimeOfHead is sniffText of a text's first sniffSize bytes (all of it
// when shorter).
func mimeOfHead(head []byte) string {
	whole := len(head) < sniffSize
	trimmed := bytes.TrimLeft(head, " \t\r\n")
	if len(trimmed) > 0 && (trimmed[0] == '[' || trimmed[0] == '{') {
		// A text that merely starts with a bracket is not JSON: Desktop
		// Commander's read_file starts "[Reading 50001 lines...]", its
		// list_directory "[DIR] .bin". Labelled JSON, no client could
		// parse it.
		switch jsonValues(trimmed, whole) {
		case 1:
			return "application/json"
		case lines:
			return "application/x-ndjson"
		}
	}
	if isDelimited("", head) {
		return "text/csv"
	}
	return "text/plain; charset=utf-8"
}

// lines is what jsonValues returns for several values, one a line.
const lines = -1

// jsonValues tokenizes head as JSON: it returns 1 when head is one JSON
// value, lines when it is several each on a line of its own (NDJSON),
// and 0 when it is not JSON (or several values on one line). When head
// is not whole (a text's first bytes), a value its end cuts counts: the
// tokens so far must be JSON. The tokenizer holds no more than head.
func jsonValues(head []byte, whole bool) int {
	d := json.NewDecoder(bytes.NewReader(head))
	values, depth := 0, 0
	end := int64(0) // where the last whole top-level value ended
	for {
		tok, err := d.Token()
		switch {
		case errors.Is(err, io.EOF) && depth == 0:
			return count(values)
		case err != nil:
			// Cut by the head's end (io.ErrUnexpectedEOF, or EOF inside
			// an array or object) is JSON so far; anything else is not.
			if whole || !(errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) {
				return 0
			}
			return count(values + 1)
		}
		if depth == 0 && values > 0 && bytes.IndexByte(head[end:d.InputOffset()], '\n') < 0 {
			return 0 // a second value on the line of the first
		}
		if delim, ok := tok.(json.Delim); ok {
			if delim == '[' || delim == '{' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			values++
			end = d.InputOffset()
		}
	}
}

// count is jsonValues' answer for n values.
func count(n int) int {
	if n > 1 {
		return lines
	}
	return n
}

// extension is the file name extension of a mime type, ".bin" for one
// it does not know.
func extension(mime string) string {
	mime, _, _ = strings.Cut(mime, ";")
	switch mime {
	case "application/json":
		return ".json"
	case "application/x-ndjson":
		return ".ndjson"
	case "text/csv":
		return ".csv"
	case "text/tab-separated-values":
		return ".tsv"
	case "text/plain":
		return ".txt"
	case "text/markdown":
		return ".md"
	case "text/html":
		return ".html"
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	case "audio/wav", "audio/x-wav":
		return ".wav"
	case "audio/mpeg":
		return ".mp3"
	case "application/pdf":
		return ".pdf"
	}
	return ".bin"
}

// isDelimited guesses CSV/TSV from the mime type or the first lines.
func isDelimited(mime string, head []byte) bool {
	mime, _, _ = strings.Cut(mime, ";")
	if mime == "text/csv" || mime == "text/tab-separated-values" {
		return true
	}
	if mime != "" && mime != "text/plain" {
		return false
	}
	lines := bytes.SplitN(head, []byte("\n"), 3)
	if len(lines) < 3 { // two whole lines, the second ended
		return false
	}
	for _, sep := range []string{",", "\t"} {
		n := bytes.Count(lines[0], []byte(sep))
		if n >= 1 && bytes.Count(lines[1], []byte(sep)) == n {
			return true
		}
	}
	return false
}
