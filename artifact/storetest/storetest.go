// Package storetest is the conformance suite of artifact.Store. Every store
// runs it; passing it is what "identical semantics" means.
//
// Beyond the doc comments of artifact.Store, the suite pins down:
//   - metadata: an empty MimeType is stored as application/octet-stream; a
//     declared SHA256 may be upper-case and is returned lower-case; Created
//     and Expires come back in UTC, to the nanosecond; Name up to 255 bytes,
//     Tenant and Source up to 128, all UTF-8, and a MIME type of printable
//     ASCII are accepted; anything else is ErrInvalid;
//   - ids: Put of a malformed id and Delete of one are ErrInvalid, Stat and
//     Open of one are ErrNotFound (no such artifact can exist);
//   - ranges: a negative offset is ErrInvalid; a range reaching past the
//     end is cut at the end; an offset at or past the end, or a zero length,
//     yields an empty reader; an absent id is ErrNotFound whatever the range;
//   - failures: when Put fails for any reason (integrity, the reader's
//     error, which it wraps, cancellation) nothing is visible and the id is
//     still free; of racing Puts of one id exactly one wins;
//   - revocations: Revoke's expiry is kept to the second; of two records
//     of one id the later expiry is reported; token ids and tenants are
//     case-sensitive; a listing reports one tenant's records (of one
//     artifact, or of all its artifacts) and nobody else's; revocations
//     and artifacts never appear in each other's listings;
//   - cancellation: every method returns an error wrapping ctx's.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
)

// LargeSize is the size of the large artifact the suite streams through
// the store (50 MB; 8 MB with -short).
func largeSize() int64 {
	if testing.Short() {
		return 8 << 20
	}
	return 50_000_000
}

// Run runs the suite. newStore is called once per subtest and must return
// an empty store that lives until the subtest ends (use t.Cleanup).
func Run(t *testing.T, newStore func(t *testing.T) artifact.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, artifact.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Declared", testDeclared},
		{"DefaultMimeType", testDefaultMimeType},
		{"Empty", testEmpty},
		{"Integrity", testIntegrity},
		{"Exists", testExists},
		{"RacingPuts", testRacingPuts},
		{"InvalidID", testInvalidID},
		{"InvalidMeta", testInvalidMeta},
		{"MetaLimits", testMetaLimits},
		{"Provenance", testProvenance},
		{"Range", testRange},
		{"NotFound", testNotFound},
		{"Delete", testDelete},
		{"ListExpired", testListExpired},
		{"Large", testLarge},
		{"LargeIntegrity", testLargeIntegrity},
		{"FailingReader", testFailingReader},
		{"Concurrent", testConcurrent},
		{"Cancel", testCancel},
		{"Ping", testPing},
		{"Revocations", testRevocations},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, newStore(t)) })
	}
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return b
}

func newMeta() artifact.Artifact {
	now := time.Now()
	return artifact.Artifact{
		ID:       artifact.NewID(),
		MimeType: "application/octet-stream",
		Created:  now,
		Expires:  now.Add(time.Hour),
	}
}

func mustPut(t *testing.T, s artifact.Store, meta artifact.Artifact, b []byte) artifact.Artifact {
	t.Helper()
	a, err := s.Put(t.Context(), meta, bytes.NewReader(b))
	if err != nil {
		t.Fatalf("Put(%s, %d bytes): %v", meta.ID, len(b), err)
	}
	return a
}

func read(t *testing.T, s artifact.Store, id string, off, n int64) []byte {
	t.Helper()
	rc, err := s.Open(t.Context(), id, off, n)
	if err != nil {
		t.Fatalf("Open(%s, %d, %d): %v", id, off, n, err)
	}
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("Open(%s, %d, %d): read: %v", id, off, n, err)
	}
	if err := rc.Close(); err != nil {
		t.Fatalf("Open(%s, %d, %d): Close: %v", id, off, n, err)
	}
	return b
}

// sameMeta fails unless got and want are the same metadata, times compared
// as instants.
func sameMeta(t *testing.T, what string, got, want artifact.Artifact) {
	t.Helper()
	g, w := got, want
	g.Created, g.Expires, w.Created, w.Expires = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if g != w {
		t.Errorf("%s:\n got %+v\nwant %+v", what, g, w)
	}
	if !got.Created.Equal(want.Created) || !got.Expires.Equal(want.Expires) {
		t.Errorf("%s: times: got created %v expires %v, want %v %v", what, got.Created, got.Expires, want.Created, want.Expires)
	}
}

// notStored fails unless id is invisible to Stat and Open.
func notStored(t *testing.T, s artifact.Store, id string) {
	t.Helper()
	if a, err := s.Stat(t.Context(), id); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Stat(%s) after a failed Put = %+v, %v; want ErrNotFound", id, a, err)
	}
	if rc, err := s.Open(t.Context(), id, 0, -1); !errors.Is(err, artifact.ErrNotFound) {
		if err == nil {
			rc.Close()
		}
		t.Errorf("Open(%s) after a failed Put: err = %v; want ErrNotFound", id, err)
	}
}

func testRoundTrip(t *testing.T, s artifact.Store) {
	created := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.FixedZone("X", 5*3600+1800))
	meta := artifact.Artifact{
		ID:       artifact.NewID(),
		Name:     "résumé 📄 \"q\" 100%.json",
		MimeType: "application/json; charset=utf-8",
		Created:  created,
		Expires:  created.Add(36*time.Hour + 1),
		Tenant:   "team-a/α",
		Source:   "tool:query?x=1&y=%20",
	}
	data := randBytes(100_000)
	got := mustPut(t, s, meta, data)
	want := meta
	want.Size, want.SHA256 = int64(len(data)), hexSum(data)
	sameMeta(t, "Put", got, want)
	if got.Created.Location() != time.UTC || got.Expires.Location() != time.UTC {
		t.Errorf("Put returned times in %v and %v, want UTC", got.Created.Location(), got.Expires.Location())
	}
	st, err := s.Stat(t.Context(), meta.ID)
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	sameMeta(t, "Stat", st, want)
	if st.Created.Location() != time.UTC {
		t.Errorf("Stat returned Created in %v, want UTC", st.Created.Location())
	}
	if b := read(t, s, meta.ID, 0, -1); !bytes.Equal(b, data) {
		t.Errorf("Open read %d bytes (sha256 %s), want %d (%s)", len(b), hexSum(b), len(data), want.SHA256)
	}
	// A second artifact with zero times and no optional fields.
	bare := artifact.Artifact{ID: artifact.NewID(), MimeType: "text/plain"}
	got = mustPut(t, s, bare, []byte("x"))
	if st, err = s.Stat(t.Context(), bare.ID); err != nil {
		t.Fatalf("Stat: %v", err)
	}
	sameMeta(t, "Stat of bare artifact", st, got)
	if !st.Created.IsZero() || !st.Expires.IsZero() || st.Name != "" || st.Tenant != "" || st.Source != "" {
		t.Errorf("bare artifact came back as %+v", st)
	}
}

func testDeclared(t *testing.T, s artifact.Store) {
	data := randBytes(70_000)
	meta := newMeta()
	meta.Size, meta.SHA256 = int64(len(data)), strings.ToUpper(hexSum(data))
	got := mustPut(t, s, meta, data)
	if got.SHA256 != hexSum(data) || got.Size != int64(len(data)) {
		t.Errorf("Put returned size %d sha256 %s, want %d %s", got.Size, got.SHA256, len(data), hexSum(data))
	}
}

func testDefaultMimeType(t *testing.T, s artifact.Store) {
	meta := newMeta()
	meta.MimeType = ""
	got := mustPut(t, s, meta, []byte("abc"))
	st, err := s.Stat(t.Context(), meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.MimeType != "application/octet-stream" || st.MimeType != got.MimeType {
		t.Errorf("MimeType: Put %q, Stat %q; want application/octet-stream", got.MimeType, st.MimeType)
	}
}

func testEmpty(t *testing.T, s artifact.Store) {
	meta := newMeta()
	got := mustPut(t, s, meta, nil)
	if got.Size != 0 || got.SHA256 != hexSum(nil) {
		t.Errorf("empty artifact: size %d sha256 %s", got.Size, got.SHA256)
	}
	st, err := s.Stat(t.Context(), meta.ID)
	if err != nil || st.Size != 0 {
		t.Fatalf("Stat = %+v, %v", st, err)
	}
	for _, r := range [][2]int64{{0, -1}, {0, 10}, {0, 0}, {5, -1}} {
		if b := read(t, s, meta.ID, r[0], r[1]); len(b) != 0 {
			t.Errorf("Open(%d, %d) of empty artifact read %d bytes", r[0], r[1], len(b))
		}
	}
}

func testIntegrity(t *testing.T, s artifact.Store) {
	data := randBytes(50_000)
	sum := hexSum(data)
	for _, tc := range []struct {
		name string
		size int64
		sha  string
	}{
		{"size too small", int64(len(data)) - 1, ""},
		{"size too large", int64(len(data)) + 1, ""},
		{"size 1", 1, ""},
		{"wrong sha256", 0, hexSum([]byte("other"))},
		{"right size wrong sha256", int64(len(data)), strings.Repeat("0", 64)},
		{"wrong size right sha256", int64(len(data)) + 7, sum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := newMeta()
			meta.Size, meta.SHA256 = tc.size, tc.sha
			a, err := s.Put(t.Context(), meta, bytes.NewReader(data))
			if !errors.Is(err, artifact.ErrIntegrity) {
				t.Fatalf("Put = %+v, %v; want ErrIntegrity", a, err)
			}
			notStored(t, s, meta.ID)
			// Nothing of the failed attempt may block the id.
			meta.Size, meta.SHA256 = int64(len(data)), sum
			mustPut(t, s, meta, data)
			if b := read(t, s, meta.ID, 0, -1); !bytes.Equal(b, data) {
				t.Errorf("retry stored other bytes")
			}
		})
	}
}

func testExists(t *testing.T, s artifact.Store) {
	first, second := randBytes(1000), randBytes(2000)
	meta := newMeta()
	meta.Name = "first"
	a := mustPut(t, s, meta, first)
	meta.Name = "second"
	_, err := s.Put(t.Context(), meta, bytes.NewReader(second))
	if !errors.Is(err, artifact.ErrExists) {
		t.Fatalf("second Put of one id: err = %v, want ErrExists", err)
	}
	st, err := s.Stat(t.Context(), meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameMeta(t, "Stat after refused overwrite", st, a)
	if b := read(t, s, meta.ID, 0, -1); !bytes.Equal(b, first) {
		t.Errorf("bytes changed after refused overwrite")
	}
}

func testRacingPuts(t *testing.T, s artifact.Store) {
	const n = 6
	meta := newMeta()
	datas := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		datas[i] = randBytes(200_000 + i)
		wg.Go(func() { _, errs[i] = s.Put(t.Context(), meta, bytes.NewReader(datas[i])) })
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("Puts %d and %d of one id both succeeded", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, artifact.ErrExists):
			t.Errorf("Put %d: %v, want nil or ErrExists", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no Put succeeded")
	}
	st, err := s.Stat(t.Context(), meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != int64(len(datas[winner])) || st.SHA256 != hexSum(datas[winner]) {
		t.Errorf("stored size %d, want the winner's %d", st.Size, len(datas[winner]))
	}
	if b := read(t, s, meta.ID, 0, -1); !bytes.Equal(b, datas[winner]) {
		t.Errorf("stored bytes are not the winner's")
	}
}

func badIDs() []string {
	id := artifact.NewID()
	return []string{
		"",
		".",
		"..",
		"../x",
		"a/b",
		"../../../../../../etc/passwd",
		"..%2f..%2f..%2fetc%2fpasswd",
		"/" + id[1:],
		id[:2] + "/" + id[3:],
		"../" + id[3:],
		id[:30] + "/.",
		strings.ToUpper(id),
		id[:31],
		id + "a",
		id[:31] + "0",
		id[:31] + "1",
		id[:31] + "8",
		id[:31] + "\x00",
		id[:31] + "=",
		id[:30] + "é",
		"tmp",
		" " + id[1:],
	}
}

func testInvalidID(t *testing.T, s artifact.Store) {
	ctx := t.Context()
	for _, id := range badIDs() {
		meta := newMeta()
		meta.ID = id
		if _, err := s.Put(ctx, meta, strings.NewReader("x")); !errors.Is(err, artifact.ErrInvalid) {
			t.Errorf("Put(%q): err = %v, want ErrInvalid", id, err)
		}
		if _, err := s.Stat(ctx, id); !errors.Is(err, artifact.ErrNotFound) {
			t.Errorf("Stat(%q): err = %v, want ErrNotFound", id, err)
		}
		if rc, err := s.Open(ctx, id, 0, -1); !errors.Is(err, artifact.ErrNotFound) {
			if err == nil {
				rc.Close()
			}
			t.Errorf("Open(%q): err = %v, want ErrNotFound", id, err)
		}
		if err := s.Delete(ctx, id); !errors.Is(err, artifact.ErrInvalid) {
			t.Errorf("Delete(%q): err = %v, want ErrInvalid", id, err)
		}
	}
	// Ids are case-sensitive: the upper-case form of a stored id is not it.
	a := mustPut(t, s, newMeta(), []byte("x"))
	if _, err := s.Stat(ctx, strings.ToUpper(a.ID)); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Stat(upper-case of a stored id): err = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, strings.ToUpper(a.ID)); !errors.Is(err, artifact.ErrInvalid) {
		t.Errorf("Delete(upper-case of a stored id): err = %v, want ErrInvalid", err)
	}
	if _, err := s.Stat(ctx, a.ID); err != nil {
		t.Errorf("Stat after Delete of its upper-case form: %v", err)
	}
}

func testInvalidMeta(t *testing.T, s artifact.Store) {
	for _, tc := range []struct {
		name string
		edit func(*artifact.Artifact)
	}{
		{"negative size", func(a *artifact.Artifact) { a.Size = -1 }},
		{"sha256 not hex", func(a *artifact.Artifact) { a.SHA256 = strings.Repeat("g", 64) }},
		{"sha256 short", func(a *artifact.Artifact) { a.SHA256 = strings.Repeat("a", 63) }},
		{"sha256 long", func(a *artifact.Artifact) { a.SHA256 = strings.Repeat("a", 65) }},
		{"name too long", func(a *artifact.Artifact) { a.Name = strings.Repeat("n", 256) }},
		{"name not utf-8", func(a *artifact.Artifact) { a.Name = "a\xffb" }},
		{"tenant too long", func(a *artifact.Artifact) { a.Tenant = strings.Repeat("t", 129) }},
		{"tenant not utf-8", func(a *artifact.Artifact) { a.Tenant = "\xc3" }},
		{"source too long", func(a *artifact.Artifact) { a.Source = strings.Repeat("s", 129) }},
		{"source not utf-8", func(a *artifact.Artifact) { a.Source = "\xed\xa0\x80" }},
		{"mime type with newline", func(a *artifact.Artifact) { a.MimeType = "text/plain\r\nX-Evil: 1" }},
		{"mime type non-ascii", func(a *artifact.Artifact) { a.MimeType = "text/plaïn" }},
		{"mime type too long", func(a *artifact.Artifact) { a.MimeType = "text/" + strings.Repeat("x", 251) }},
		{"mime type padded", func(a *artifact.Artifact) { a.MimeType = " text/plain" }},
		{"expires after 9999", func(a *artifact.Artifact) { a.Expires = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := newMeta()
			tc.edit(&meta)
			if _, err := s.Put(t.Context(), meta, strings.NewReader("data")); !errors.Is(err, artifact.ErrInvalid) {
				t.Fatalf("Put: err = %v, want ErrInvalid", err)
			}
			notStored(t, s, meta.ID)
		})
	}
}

// testMetaLimits stores metadata at the limits, in the characters that cost
// the most to encode.
func testMetaLimits(t *testing.T, s artifact.Store) {
	meta := newMeta()
	meta.Name = strings.Repeat("é", 127) + "\n"                              // 255 bytes
	meta.Tenant = strings.Repeat("\x01", 64) + strings.Repeat("€", 21) + "x" // 128 bytes
	meta.Source = strings.Repeat("%\"\\<>&+ ", 16)                           // 128 bytes
	meta.MimeType = "application/x-" + strings.Repeat("y", 255-len("application/x-"))
	if len(meta.Name) != 255 || len(meta.Tenant) != 128 || len(meta.Source) != 128 || len(meta.MimeType) != 255 {
		t.Fatalf("test data has wrong lengths %d %d %d %d", len(meta.Name), len(meta.Tenant), len(meta.Source), len(meta.MimeType))
	}
	a := mustPut(t, s, meta, []byte("limits"))
	st, err := s.Stat(t.Context(), meta.ID)
	if err != nil {
		t.Fatal(err)
	}
	sameMeta(t, "Stat", st, a)
	if st.Name != meta.Name || st.Tenant != meta.Tenant || st.Source != meta.Source || st.MimeType != meta.MimeType {
		t.Errorf("metadata at the limits changed:\n got %#v\nwant %#v", st, meta)
	}
}

// testRange checks that Open returns what a range selects, cut at the
// artifact's end; that a negative offset is ErrInvalid and an absent id
// ErrNotFound, whatever the range; and that a reader closed before its end
// closes cleanly.
func testRange(t *testing.T, s artifact.Store) {
	g := Gen{Seed: 7, Size: 1000}
	data := g.Bytes(0, g.Size)
	a := mustPut(t, s, newMeta(), data)
	checkRangeReads(t, s, a.ID, data)
	checkRangeRefusals(t, s, a.ID)
	// Closing before reading everything must be fine.
	rc, err := s.Open(t.Context(), a.ID, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 10)); err != nil {
		t.Errorf("short read: %v", err)
	}
	if err := rc.Close(); err != nil {
		t.Errorf("Close after a partial read: %v", err)
	}
}

// checkRangeReads reads ranges of id, whose bytes are data (1000 of them),
// and compares each with the bytes it selects.
func checkRangeReads(t *testing.T, s artifact.Store, id string, data []byte) {
	t.Helper()
	for _, r := range []struct{ off, n, from, to int64 }{
		{0, -1, 0, 1000},
		{0, 1000, 0, 1000},
		{0, 1, 0, 1},
		{10, 20, 10, 30},
		{990, -1, 990, 1000},
		{995, 10, 995, 1000},
		{999, 1, 999, 1000},
		{0, 1 << 40, 0, 1000},
		{0, 0, 0, 0},
		{500, 0, 500, 500},
		{1000, -1, 1000, 1000},
		{1000, 5, 1000, 1000},
		{5000, -1, 5000, 5000},
		{5000, 10, 5000, 5000},
	} {
		got := read(t, s, id, r.off, r.n)
		want := data[min(r.from, 1000):min(r.to, 1000)]
		if !bytes.Equal(got, want) {
			t.Errorf("Open(%d, %d): got %d bytes, want %d (bytes %d-%d)", r.off, r.n, len(got), len(want), r.from, r.to)
		}
	}
}

// checkRangeRefusals checks that a negative offset of id is ErrInvalid
// and any range of an absent id ErrNotFound.
func checkRangeRefusals(t *testing.T, s artifact.Store, id string) {
	t.Helper()
	if rc, err := s.Open(t.Context(), id, -1, 5); !errors.Is(err, artifact.ErrInvalid) {
		if err == nil {
			rc.Close()
		}
		t.Errorf("Open(-1, 5): err = %v, want ErrInvalid", err)
	}
	absent := artifact.NewID()
	for _, r := range [][2]int64{{0, -1}, {0, 0}, {10, 5}, {5000, -1}} {
		if rc, err := s.Open(t.Context(), absent, r[0], r[1]); !errors.Is(err, artifact.ErrNotFound) {
			if err == nil {
				rc.Close()
			}
			t.Errorf("Open(absent, %d, %d): err = %v, want ErrNotFound", r[0], r[1], err)
		}
	}
}

func testNotFound(t *testing.T, s artifact.Store) {
	id := artifact.NewID()
	if a, err := s.Stat(t.Context(), id); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Stat(absent) = %+v, %v; want ErrNotFound", a, err)
	}
	if _, err := s.Open(t.Context(), id, 0, -1); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Open(absent): err = %v; want ErrNotFound", err)
	}
	if err := s.Delete(t.Context(), id); err != nil {
		t.Errorf("Delete(absent) = %v, want nil", err)
	}
}

func testDelete(t *testing.T, s artifact.Store) {
	keep := mustPut(t, s, newMeta(), []byte("keep"))
	a := mustPut(t, s, newMeta(), []byte("doomed"))
	if err := s.Delete(t.Context(), a.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Stat(t.Context(), a.ID); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Stat after Delete: err = %v, want ErrNotFound", err)
	}
	if _, err := s.Open(t.Context(), a.ID, 0, -1); !errors.Is(err, artifact.ErrNotFound) {
		t.Errorf("Open after Delete: err = %v, want ErrNotFound", err)
	}
	if err := s.Delete(t.Context(), a.ID); err != nil {
		t.Errorf("second Delete = %v, want nil", err)
	}
	if b := read(t, s, keep.ID, 0, -1); string(b) != "keep" {
		t.Errorf("Delete of one artifact changed another: %q", b)
	}
}

// testListExpired checks that ListExpired hands out exactly the artifacts
// expired at the time it is given, stops at its function's first error,
// and lets that function delete what it is given.
func testListExpired(t *testing.T, s artifact.Store) {
	now := time.Now()
	want := []string{
		putExpiring(t, s, now.Add(-48*time.Hour)),
		putExpiring(t, s, now.Add(-time.Second)),
		putExpiring(t, s, now.Add(-time.Nanosecond)),
		putExpiring(t, s, now), // Expired(now) is true at the instant itself
	}
	future := []string{putExpiring(t, s, now.Add(time.Nanosecond)), putExpiring(t, s, now.Add(time.Hour)), putExpiring(t, s, time.Time{})}

	slices.Sort(want)
	if got := ListExpired(t, s, now); !slices.Equal(got, want) {
		t.Errorf("ListExpired(now) = %v\nwant %v (not %v)", got, want, future)
	}
	if got := ListExpired(t, s, now.Add(-72*time.Hour)); len(got) != 0 {
		t.Errorf("ListExpired(3 days ago) = %v, want none", got)
	}

	// fn's error stops the walk and comes back.
	errStop := errors.New("stop")
	calls := 0
	err := s.ListExpired(t.Context(), now, func(string) error { calls++; return errStop })
	if !errors.Is(err, errStop) || calls != 1 {
		t.Errorf("ListExpired with failing fn: err = %v after %d calls, want errStop after 1", err, calls)
	}

	// Sweeping: fn deletes what it is given.
	err = s.ListExpired(t.Context(), now, func(id string) error { return s.Delete(t.Context(), id) })
	if err != nil {
		t.Fatalf("ListExpired deleting: %v", err)
	}
	if got := ListExpired(t, s, now); len(got) != 0 {
		t.Errorf("after sweeping, ListExpired = %v", got)
	}
	for _, id := range future {
		if _, err := s.Stat(t.Context(), id); err != nil {
			t.Errorf("unexpired %s: %v", id, err)
		}
	}
}

// putExpiring stores a small artifact that expires at exp (zero: never)
// and returns its id.
func putExpiring(t *testing.T, s artifact.Store, exp time.Time) string {
	t.Helper()
	meta := newMeta()
	meta.Expires = exp
	return mustPut(t, s, meta, []byte(meta.ID)).ID
}

// ListExpired returns the ids s.ListExpired hands out at at, sorted,
// failing the test if it fails. Stores' own tests use it too.
func ListExpired(t *testing.T, s artifact.Store, at time.Time) []string {
	t.Helper()
	var ids []string
	if err := s.ListExpired(t.Context(), at, func(id string) error { ids = append(ids, id); return nil }); err != nil {
		t.Fatalf("ListExpired: %v", err)
	}
	slices.Sort(ids)
	return ids
}

// streamCheck reads rc to the end, hashing, and compares with g.
func streamCheck(t *testing.T, what string, rc io.ReadCloser, g *Gen, off int64) {
	t.Helper()
	defer rc.Close()
	buf := make([]byte, 1<<20)
	pos := off
	for {
		n, err := rc.Read(buf)
		if n > 0 {
			if want := g.Bytes(pos, int64(n)); !bytes.Equal(buf[:n], want) {
				t.Fatalf("%s: bytes differ in [%d, %d)", what, pos, pos+int64(n))
			}
			pos += int64(n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: read at %d: %v", what, pos, err)
		}
	}
	if pos != g.Size {
		t.Fatalf("%s: ended at %d, want %d", what, pos, g.Size)
	}
}

func testLarge(t *testing.T, s artifact.Store) {
	size := largeSize()
	g := Gen{Seed: 42, Size: size}
	h := sha256.New()
	if _, err := io.Copy(h, &Gen{Seed: 42, Size: size}); err != nil {
		t.Fatal(err)
	}
	sum := hex.EncodeToString(h.Sum(nil))

	start := time.Now()
	meta := newMeta()
	a, err := s.Put(t.Context(), meta, &g) // undeclared size: the streaming path
	if err != nil {
		t.Fatalf("Put of %d bytes: %v", size, err)
	}
	t.Logf("Put of %d MB took %v", size/1e6, time.Since(start).Round(time.Millisecond))
	if a.Size != size || a.SHA256 != sum {
		t.Fatalf("Put returned size %d sha256 %s, want %d %s", a.Size, a.SHA256, size, sum)
	}
	st, err := s.Stat(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := meta
	want.Size, want.SHA256 = size, sum
	sameMeta(t, "Stat of large artifact", st, want)
	rc, err := s.Open(t.Context(), a.ID, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	streamCheck(t, "full read", rc, &Gen{Seed: 42, Size: size}, 0)
	for _, r := range [][2]int64{{16<<20 - 100, 200}, {5 << 20, 1 << 20}, {size - 10, -1}, {size - 10, 100}} {
		got := read(t, s, a.ID, r[0], r[1])
		n := r[1]
		if n < 0 {
			n = size
		}
		if want := g.Bytes(r[0], n); !bytes.Equal(got, want) {
			t.Errorf("Open(%d, %d): %d bytes, want %d matching", r[0], r[1], len(got), len(want))
		}
	}

	// The same bytes with declared size and checksum.
	meta = newMeta()
	meta.Size, meta.SHA256 = size, sum
	if _, err := s.Put(t.Context(), meta, &Gen{Seed: 42, Size: size}); err != nil {
		t.Fatalf("Put with declared size and sha256: %v", err)
	}
}

func testLargeIntegrity(t *testing.T, s artifact.Store) {
	// Larger than one part of any store that uploads in parts of 16 MiB.
	const size = 20 << 20
	for _, tc := range []struct {
		name string
		size int64
		sha  string
	}{
		{"wrong sha256", 0, strings.Repeat("ab", 32)},
		{"size too small", size - 1, ""},
		{"size far too small", 17 << 20, ""},
		{"size too large", size + 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta := newMeta()
			meta.Size, meta.SHA256 = tc.size, tc.sha
			if _, err := s.Put(t.Context(), meta, &Gen{Seed: 3, Size: size}); !errors.Is(err, artifact.ErrIntegrity) {
				t.Fatalf("Put: err = %v, want ErrIntegrity", err)
			}
			notStored(t, s, meta.ID)
		})
	}
}

func testFailingReader(t *testing.T, s artifact.Store) {
	for _, n := range []int64{0, 1000, 20 << 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			meta := newMeta()
			_, err := s.Put(t.Context(), meta, &failReader{g: Gen{Seed: 1, Size: 1 << 40}, n: n, err: errBoom})
			if !errors.Is(err, errBoom) {
				t.Fatalf("Put from a reader failing after %d bytes: err = %v, want it to wrap the reader's", n, err)
			}
			notStored(t, s, meta.ID)
			mustPut(t, s, meta, []byte("retry"))
		})
	}
}

func testConcurrent(t *testing.T, s artifact.Store) {
	const n = 16
	metas := make([]artifact.Artifact, n)
	datas := make([][]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		metas[i], datas[i] = newMeta(), randBytes(32<<10+i*1000)
		wg.Go(func() {
			if _, err := s.Put(t.Context(), metas[i], bytes.NewReader(datas[i])); err != nil {
				t.Errorf("Put %d: %v", i, err)
				return
			}
			// Read back while others are still writing.
			rc, err := s.Open(t.Context(), metas[i].ID, 0, -1)
			if err != nil {
				t.Errorf("Open %d: %v", i, err)
				return
			}
			defer rc.Close()
			if b, err := io.ReadAll(rc); err != nil || !bytes.Equal(b, datas[i]) {
				t.Errorf("artifact %d read back wrong (%d bytes, %v)", i, len(b), err)
			}
		})
	}
	wg.Wait()
	for i := range n {
		st, err := s.Stat(t.Context(), metas[i].ID)
		if err != nil || st.SHA256 != hexSum(datas[i]) {
			t.Errorf("Stat %d = %+v, %v", i, st, err)
		}
	}
}

// cancelAfter yields bytes of a Gen and cancels a context once it has
// yielded n of them, continuing afterwards as a reader would that does not
// watch the context.
type cancelAfter struct {
	g      Gen
	n      int64
	cancel context.CancelFunc
}

func (r *cancelAfter) Read(p []byte) (int, error) {
	if r.g.off >= r.n {
		r.cancel()
	}
	return r.g.Read(p)
}

func testCancel(t *testing.T, s artifact.Store) {
	existing := mustPut(t, s, newMeta(), []byte("exists"))
	canceled, cancel := context.WithCancel(t.Context())
	cancel()

	meta := newMeta()
	if _, err := s.Put(canceled, meta, strings.NewReader("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with canceled ctx: err = %v, want context.Canceled", err)
	}
	notStored(t, s, meta.ID)

	for _, n := range []int64{1 << 20, 18 << 20} {
		ctx, cancel := context.WithCancel(t.Context())
		meta = newMeta()
		_, err := s.Put(ctx, meta, &cancelAfter{g: Gen{Seed: 9, Size: 40 << 20}, n: n, cancel: cancel})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Put canceled after %d bytes: err = %v, want context.Canceled", n, err)
		}
		notStored(t, s, meta.ID)
	}

	if _, err := s.Stat(canceled, existing.ID); !errors.Is(err, context.Canceled) {
		t.Errorf("Stat with canceled ctx: err = %v, want context.Canceled", err)
	}
	if rc, err := s.Open(canceled, existing.ID, 0, -1); !errors.Is(err, context.Canceled) {
		if err == nil {
			rc.Close()
		}
		t.Errorf("Open with canceled ctx: err = %v, want context.Canceled", err)
	}
	if err := s.Delete(canceled, existing.ID); !errors.Is(err, context.Canceled) {
		t.Errorf("Delete with canceled ctx: err = %v, want context.Canceled", err)
	}
	if _, err := s.Stat(t.Context(), existing.ID); err != nil {
		t.Errorf("Stat after a canceled Delete: %v", err)
	}
	err := s.ListExpired(canceled, time.Now().Add(24*time.Hour), func(string) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ListExpired with canceled ctx: err = %v, want context.Canceled", err)
	}
	if err := s.Ping(canceled); !errors.Is(err, context.Canceled) {
		t.Errorf("Ping with canceled ctx: err = %v, want context.Canceled", err)
	}
}

func testPing(t *testing.T, s artifact.Store) {
	if err := s.Ping(t.Context()); err != nil {
		t.Errorf("Ping = %v", err)
	}
}
