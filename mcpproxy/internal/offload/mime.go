package offload

import (
	"bytes"
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

// sniffSize is how much of a text sniffText reads.
const sniffSize = 2048

// sniffText guesses a text item's mime type from its first bytes.
func sniffText(text io.Reader) string {
	head := make([]byte, sniffSize)
	n, _ := io.ReadFull(text, head)
	if c, ok := text.(io.Closer); ok {
		c.Close()
	}
	return mimeOfHead(head[:n])
}

// mimeOfHead is sniffText of a text's first sniffSize bytes.
func mimeOfHead(head []byte) string {
	head = bytes.TrimLeft(head, " \t\r\n")
	switch {
	case len(head) > 0 && (head[0] == '[' || head[0] == '{'):
		return "application/json"
	case isDelimited("", head):
		return "text/csv"
	}
	return "text/plain; charset=utf-8"
}

func extension(mime string) string {
	mime, _, _ = strings.Cut(mime, ";")
	switch mime {
	case "application/json":
		return ".json"
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
