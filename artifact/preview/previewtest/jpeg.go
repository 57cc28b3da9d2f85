// Package previewtest makes the inputs that tests of previews need and
// that no encoder of the standard library writes: a progressive JPEG of
// any size, as small as an attacker can make it.
package previewtest

import (
	"encoding/binary"
	"fmt"
)

// ProgressiveJPEG returns a valid progressive JPEG (SOF2) of w×h pixels,
// an even gray, with one component per byte of sampling (its sampling
// factors, 0x11 for full resolution: 0x22, 0x11, 0x11 is YCbCr 4:2:0; one
// to four components; four carry an Adobe segment, as image/jpeg wants of
// them). Its one scan holds every block's DC coefficient alone, coded in
// one bit, so the file takes about a bit for each 8×8 block of each
// component, while a decoder holds every coefficient of every block:
// 22 Mpx of 4:4:4 fit in 128 KiB. It panics on an impossible shape.
func ProgressiveJPEG(w, h int, sampling ...byte) []byte {
	nc := len(sampling)
	if w < 1 || h < 1 || w > 0xffff || h > 0xffff || nc < 1 || nc > 4 {
		panic(fmt.Sprintf("previewtest: no %d×%d JPEG of %d components", w, h, nc))
	}
	seg := func(b []byte, marker byte, body ...byte) []byte {
		b = append(b, 0xff, marker)
		b = binary.BigEndian.AppendUint16(b, uint16(2+len(body)))
		return append(b, body...)
	}
	b := []byte{0xff, 0xd8}
	if nc == 4 {
		b = seg(b, 0xee, 'A', 'd', 'o', 'b', 'e', 0, 100, 0, 0, 0, 0, 2) // YCCK
	}
	b = seg(b, 0xdb, append([]byte{0}, make64(1)...)...) // one quantization table, all ones
	sof := []byte{8, byte(h >> 8), byte(h), byte(w >> 8), byte(w), byte(nc)}
	hmax, vmax := 1, 1
	for i, hv := range sampling {
		sof = append(sof, byte(i+1), hv, 0)
		hmax, vmax = max(hmax, int(hv>>4)), max(vmax, int(hv&0xf))
	}
	if nc == 1 {
		hmax, vmax = 1, 1
	}
	b = seg(b, 0xc2, sof...)
	// DC table 0: one code, "0", for a difference of 0.
	b = seg(b, 0xc4, 0x00, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	sos := []byte{byte(nc)}
	for i := range nc {
		sos = append(sos, byte(i+1), 0x00)
	}
	b = seg(b, 0xda, append(sos, 0, 0, 0)...) // DC only, no successive approximation
	mcus := ((w + 8*hmax - 1) / (8 * hmax)) * ((h + 8*vmax - 1) / (8 * vmax))
	bits := 0
	for _, hv := range sampling {
		if nc == 1 {
			hv = 0x11
		}
		bits += mcus * int(hv>>4) * int(hv&0xf)
	}
	b = append(b, make([]byte, (bits+7)/8)...) // every code "0"
	return append(b, 0xff, 0xd9)
}

func make64(v byte) []byte {
	b := make([]byte, 64)
	for i := range b {
		b[i] = v
	}
	return b
}
