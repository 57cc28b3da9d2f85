package previewtest

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
)

// Padded returns img, a PNG or a JPEG, with pad bytes of metadata put
// before its pixel data, where every reader has to pass them: one private
// ancillary chunk ("spWy") after a PNG's IHDR, or COM segments of at most
// 64 KiB each after a JPEG's SOI. Decoders skip both, so it is what a
// large image of ordinary dimensions looks like (a screenshot carrying a
// big color profile, a photo its maker notes). It panics on anything
// but a PNG or a JPEG.
func Padded(img []byte, pad int) []byte {
	out := make([]byte, 0, len(img)+pad+pad/0xfff0*4+16)
	switch {
	case bytes.HasPrefix(img, []byte("\x89PNG\r\n\x1a\n")):
		at := 8 + 8 + 13 + 4 // the signature, then IHDR with its CRC
		out = append(out, img[:at]...)
		out = binary.BigEndian.AppendUint32(out, uint32(pad))
		start := len(out)
		out = append(append(out, "spWy"...), make([]byte, pad)...)
		out = binary.BigEndian.AppendUint32(out, crc32.ChecksumIEEE(out[start:]))
		return append(out, img[at:]...)
	case bytes.HasPrefix(img, []byte{0xff, 0xd8}):
		out = append(out, 0xff, 0xd8)
		for pad > 0 {
			n := min(pad, 0xffff-2)
			out = binary.BigEndian.AppendUint16(append(out, 0xff, 0xfe), uint16(2+n))
			out = append(out, make([]byte, n)...)
			pad -= n
		}
		return append(out, img[2:]...)
	}
	panic("previewtest: Padded takes a PNG or a JPEG")
}
