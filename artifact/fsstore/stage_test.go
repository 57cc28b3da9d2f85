package fsstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/spillway-dev/spillway/artifact"
)

func readAll(t *testing.T, s *Store, id string) []byte {
	t.Helper()
	rc, err := s.Open(context.Background(), id, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A staging of this store becomes the artifact as it is (the same file,
// its bytes not copied), once; a second Put of it, or a Put into another
// store, reads it. Its temporary name goes with Close, the artifact
// stays.
func TestStagePut(t *testing.T) {
	ctx := context.Background()
	s, other := newStore(t), newStore(t)
	st, err := s.Stage()
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("staged bytes\n"), 100_000)
	for b := want; len(b) > 0; b = b[min(len(b), 70_000):] {
		if _, err := st.Write(b[:min(len(b), 70_000)]); err != nil {
			t.Fatal(err)
		}
	}
	if st.Size() != int64(len(want)) {
		t.Fatalf("Size %d, want %d", st.Size(), len(want))
	}
	got := make([]byte, 20)
	if n, err := st.ReadAt(got, int64(len(want))-13); n != 13 || !errors.Is(err, io.EOF) || string(got[:n]) != "staged bytes\n" {
		t.Fatalf("ReadAt at the end: %d %v %q", n, err, got[:n])
	}
	sum := sha256.Sum256(want)
	a, err := s.Put(ctx, artifact.Artifact{ID: artifact.NewID(), Name: "a.txt"}, artifact.StagedReader(st))
	if err != nil {
		t.Fatal(err)
	}
	if a.Size != int64(len(want)) || a.SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("stored %d bytes, sha256 %s", a.Size, a.SHA256)
	}
	fi, _ := os.Stat(s.path(a.ID))
	sfi, _ := st.(*staging).f.Stat()
	if !os.SameFile(fi, sfi) {
		t.Fatal("the artifact is a copy of the staging, not the staging")
	}
	if _, err := st.Write([]byte("x")); !errors.Is(err, errTaken) {
		t.Fatalf("Write after Put: %v, want errTaken", err)
	}
	b, err := s.Put(ctx, artifact.Artifact{ID: artifact.NewID()}, artifact.StagedReader(st))
	if err != nil {
		t.Fatal(err)
	}
	fb, _ := os.Stat(s.path(b.ID))
	if os.SameFile(fb, fi) || b.SHA256 != a.SHA256 {
		t.Fatal("a second Put of a staging took the same file, or other bytes")
	}
	c, err := other.Put(ctx, artifact.Artifact{ID: artifact.NewID()}, artifact.StagedReader(st))
	if err != nil || c.SHA256 != a.SHA256 {
		t.Fatalf("Put of another store's staging: %v", err)
	}
	st.Close()
	st.Close()
	if es, _ := os.ReadDir(s.tmp()); len(es) != 0 {
		t.Fatalf("%d temporary files left after Close", len(es))
	}
	for _, id := range []string{a.ID, b.ID} {
		if !bytes.Equal(readAll(t, s, id), want) {
			t.Fatalf("artifact %s reads other bytes", id)
		}
	}
	if !bytes.Equal(readAll(t, other, c.ID), want) {
		t.Fatal("the other store's copy reads other bytes")
	}
}

// A staging that disagrees with the declared size is not stored; one
// closed without a Put leaves nothing behind.
func TestStageRefused(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	st, err := s.Stage()
	if err != nil {
		t.Fatal(err)
	}
	st.Write([]byte("four"))
	id := artifact.NewID()
	if _, err := s.Put(ctx, artifact.Artifact{ID: id, Size: 5}, artifact.StagedReader(st)); !errors.Is(err, artifact.ErrIntegrity) {
		t.Fatalf("Put of 4 bytes declared 5: %v", err)
	}
	if _, err := s.Stat(ctx, id); !errors.Is(err, artifact.ErrNotFound) {
		t.Fatalf("the refused artifact is there: %v", err)
	}
	st.Close()
	if es, _ := os.ReadDir(s.tmp()); len(es) != 0 {
		t.Fatalf("%d temporary files left after Close", len(es))
	}
}
