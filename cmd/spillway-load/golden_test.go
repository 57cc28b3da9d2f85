package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"testing"
)

// The upstream's answers must stay byte for byte what they were: the
// figures in BENCHMARKS.md were measured on these outputs, and the load
// tool checks links against hashes it computes with writeBig. The hashes
// below were taken from the code before issue 39's refactor.

// goldenBig is, for each kind and size of the big tool (seed 3), the
// length and SHA-256 writeBig gives and the SHA-256 of the answer member
// the upstream writes.
var goldenBig = map[string]struct {
	n              int64
	output, answer string
}{
	"text/1":            {2, "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945", "bf5e4572f06990ea8ea8d9a2c903eb25d5dfb55b50de7e48d4be07d13705bf47"},
	"text/1000":         {1089, "01c1565c4b3fc775ad92ad635141e6f1080fb1af02a979f745895b0572b660b8", "b9723c52540982a04cdfb7afcf452acba45c3800d79ca7b5e5ff3e3504f141c8"},
	"text/300000":       {300088, "5f90da56c8d6797f837a0547ed04954319e30e0ae20433ae35bfb208a0887c5e", "1a3d51fea16066f50731023e0eb79c2dfbbe3f6e7400d4eab16c18fe5ef256f4"},
	"text-u/1":          {2, "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945", "bf5e4572f06990ea8ea8d9a2c903eb25d5dfb55b50de7e48d4be07d13705bf47"},
	"text-u/1000":       {1089, "01c1565c4b3fc775ad92ad635141e6f1080fb1af02a979f745895b0572b660b8", "7ba059d58fc1a86ff2bd2fbb78d250bae368473d8625c7f5e8d067cee1cdc4e5"},
	"text-u/300000":     {300088, "5f90da56c8d6797f837a0547ed04954319e30e0ae20433ae35bfb208a0887c5e", "c1388f7c1a3273f5638068b4c9ea5ca7517918a8e5421fe99274a69fa605e9c3"},
	"text-go/1":         {2, "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945", "bf5e4572f06990ea8ea8d9a2c903eb25d5dfb55b50de7e48d4be07d13705bf47"},
	"text-go/1000":      {1092, "c71c5e57d33bde0c6b116d77f7d8936c221178165b72ae3809b321d7b4b878f9", "22e0206022856b30e9b876c3e8cd927c6d19a543a3b5dbc8cf6e8f565a64eb7b"},
	"text-go/300000":    {300025, "fbfc21c53b85571ef95e82a9318da201f48bff61e8bf75ba6fb567946a21e216", "1c9e8a6107930f97e2182d303bcbf0a6d313147f46742d0c98d2f8ea27a77c2d"},
	"image/1":           {1, "0a43b22d89fa2499be5c7704c9bf273260b0ca9588e4cd1897cd80f9c96cd97a", "ff2f4b710edae248ae5a5d7a974791c4d4e15acfee0061fe66e42e21db28342c"},
	"image/1000":        {1000, "973efb9c098343047d9cec1b2c5220e53d4c54fb5f2502c91e29226cbf06ae40", "a82e48614959df4f10361d5e6009346b1d746332fe5361e82579d792380dd989"},
	"image/300000":      {300000, "3b9121e5ada0d04409aad58aafdb9412e538e987bbadb3aa4c1a4464d434a703", "deb011b960671bb68c3203c3ceff4215aad961df5cc091fb93ab992680a03159"},
	"jpeg/1":            {2, "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945", "3dce7aa001b19588f9d937d39c4fb34d181fabcb788607f89fa2188c88f36caa"},
	"jpeg/1000":         {1089, "01c1565c4b3fc775ad92ad635141e6f1080fb1af02a979f745895b0572b660b8", "3dce7aa001b19588f9d937d39c4fb34d181fabcb788607f89fa2188c88f36caa"},
	"jpeg/300000":       {300088, "5f90da56c8d6797f837a0547ed04954319e30e0ae20433ae35bfb208a0887c5e", "3dce7aa001b19588f9d937d39c4fb34d181fabcb788607f89fa2188c88f36caa"},
	"jpeg-bound/1":      {2, "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945", "5e5fcacce3a1e265f73d5ff2c4084db7ed477bad3fa66ae36ddf2bd5e6356b76"},
	"jpeg-bound/1000":   {1089, "01c1565c4b3fc775ad92ad635141e6f1080fb1af02a979f745895b0572b660b8", "5e5fcacce3a1e265f73d5ff2c4084db7ed477bad3fa66ae36ddf2bd5e6356b76"},
	"jpeg-bound/300000": {300088, "5f90da56c8d6797f837a0547ed04954319e30e0ae20433ae35bfb208a0887c5e", "5e5fcacce3a1e265f73d5ff2c4084db7ed477bad3fa66ae36ddf2bd5e6356b76"},
	"/1":                {2, "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945", "bf5e4572f06990ea8ea8d9a2c903eb25d5dfb55b50de7e48d4be07d13705bf47"},
	"/1000":             {1089, "01c1565c4b3fc775ad92ad635141e6f1080fb1af02a979f745895b0572b660b8", "b9723c52540982a04cdfb7afcf452acba45c3800d79ca7b5e5ff3e3504f141c8"},
	"/300000":           {300088, "5f90da56c8d6797f837a0547ed04954319e30e0ae20433ae35bfb208a0887c5e", "1a3d51fea16066f50731023e0eb79c2dfbbe3f6e7400d4eab16c18fe5ef256f4"},
}

// goldenOther is the SHA-256 of the answer member to the other requests,
// by method and tool.
var goldenOther = map[string]string{
	"initialize/":       "33efdf8f6fedf876fe423e3e32722cc5367fb9db7aa5b53a7df3f9f47bd9907c",
	"ping/":             "cc0d95a75580d1b5753ce4486d697d7fa30ecf875629fc9769f17ebc491bad7f",
	"tools/list/":       "92be2d5391f1d02632d444f6b9c2b99982b59194202a87f3477bd9baf85d42aa",
	"tools/call/small":  "c2c6e6797d5dd6b223a2ecdfd70d3f025cef13f686baf935525a438170c99c21",
	"tools/call/shaped": "9be5e5b080483c19ab6d79a10bb18f2feb3fa02eee266c95bb3fb33b7119ed26",
	"tools/call/nope":   "d9b153db030fdbfdb1d401344fc149b5cac85c51ba7f5bda3af481ca1170ae24",
	"nope/":             "93f952c9e7940eb6822b1586431a257d31abdf3a37f04ad69980793117f305ec",
}

// answerHash is the SHA-256 of the answer member the upstream writes.
func answerHash(t testing.TB, method, tool string, a bigArgs) string {
	t.Helper()
	h := sha256.New()
	if err := upstreamAnswer(method, "2025-06-18", tool, a)(h); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestUpstreamAnswersUnchanged(t *testing.T) {
	for _, kind := range []string{"text", "text-u", "text-go", "image", "jpeg", "jpeg-bound", ""} {
		for _, size := range []int64{1, 1000, 300_000} {
			key := fmt.Sprint(kind, "/", size)
			want := goldenBig[key]
			a := bigArgs{Bytes: size, Kind: kind, Seed: 3}
			h := sha256.New()
			n, err := writeBig(h, a)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(h.Sum(nil)); n != want.n || got != want.output {
				t.Errorf("writeBig %s: %d bytes, SHA-256 %s; want %d, %s", key, n, got, want.n, want.output)
			}
			if got := answerHash(t, "tools/call", "big", a); got != want.answer {
				t.Errorf("answer %s: SHA-256 %s, want %s", key, got, want.answer)
			}
		}
	}
	for _, m := range [][2]string{{"initialize", ""}, {"ping", ""}, {"tools/list", ""}, {"tools/call", "small"}, {"tools/call", "shaped"}, {"tools/call", "nope"}, {"nope", ""}} {
		key := m[0] + "/" + m[1]
		if got := answerHash(t, m[0], m[1], bigArgs{}); got != goldenOther[key] {
			t.Errorf("answer %s: SHA-256 %s, want %s", key, got, goldenOther[key])
		}
	}
}

// BenchmarkWriteBig measures the generator of the big outputs, which the
// upstream runs for every byte a big-output comparison carries.
func BenchmarkWriteBig(b *testing.B) {
	benchBig(b, []string{"text", "text-go", "image"}, func(a bigArgs) error {
		_, err := writeBig(io.Discard, a)
		return err
	})
}

// BenchmarkBigAnswer measures the upstream's whole big answer, escaped
// for JSON or encoded as base64.
func BenchmarkBigAnswer(b *testing.B) {
	benchBig(b, []string{"text", "text-u", "image"}, func(a bigArgs) error {
		return upstreamAnswer("tools/call", "", "big", a)(io.Discard)
	})
}

// benchBig runs write on an 8 MiB output of each kind.
func benchBig(b *testing.B, kinds []string, write func(bigArgs) error) {
	for _, kind := range kinds {
		b.Run(kind, func(b *testing.B) {
			a := bigArgs{Bytes: 8 << 20, Kind: kind, Seed: 1}
			b.SetBytes(a.Bytes)
			b.ReportAllocs()
			for b.Loop() {
				if err := write(a); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
