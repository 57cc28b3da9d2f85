package preview

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
)

// binAn previews audio and other binaries from their head: the type by
// magic number, what the header tells (a WAV's format and duration, a
// PDF's version, a zip's first entry), and the size.
type binAn struct {
	format string
	head   []byte // the sniffed head, not copied
}

func (b *binAn) write([]byte) {}

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
	case "zip":
		if n := zipFirstName(b.head); n != "" {
			detail = append(detail, fmt.Sprintf("first entry %q", n))
		}
	case "":
		if len(b.head) > 0 {
			detail = append(detail, fmt.Sprintf("starts %x", b.head[:min(8, len(b.head))]))
		}
	}
	s := fmt.Sprintf("%s, %s", name, humanSize(f.Size))
	if len(detail) > 0 {
		s += ", " + strings.Join(detail, ", ")
	}
	return []section{{prioHead, s + "."}}
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
