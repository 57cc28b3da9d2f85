package fsstore

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/artifacttest"
	"github.com/spillway-dev/spillway/artifact/storetest"
)

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) artifact.Store { return newStore(t) })
}

func TestRevocations(t *testing.T) {
	artifacttest.RunRevocations(t, func(t *testing.T) artifact.Store { return newStore(t) })
}

// The fetch handler's redirect mode must never pick the directory store.
func TestNotPresigner(t *testing.T) {
	if _, ok := any(newStore(t)).(artifact.Presigner); ok {
		t.Error("*fsstore.Store implements artifact.Presigner")
	}
}

func BenchmarkPut(b *testing.B)  { storetest.BenchPut(b, newStore(b)) }
func BenchmarkOpen(b *testing.B) { storetest.BenchOpen(b, newStore(b)) }

// snapshot lists every file under root with its content.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.IsDir() {
			m[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		m[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTraversal plants files around and inside the store where malformed
// ids would lead if they were used as paths, and checks that no operation
// reads, changes or creates anything there.
func TestTraversal(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "store")
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	plant := map[string]string{
		"x":                                    "outside",
		"b":                                    "outside b",
		"etc/passwd":                           "root:x:0:0",
		"store/a/b":                            "inside, not an artifact",
		"store/tmp/" + strings.Repeat("a", 32): "temp",
	}
	for p, c := range plant {
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, root)
	ids := []string{"../x", "a/b", "../../x", "../b", "..", "../etc/passwd", "tmp/" + strings.Repeat("a", 28),
		"../" + strings.Repeat("a", 29), "a/" + strings.Repeat("b", 30), "/" + strings.Repeat("a", 31),
		strings.Repeat(".", 32), "tm/" + strings.Repeat("a", 29)}
	ctx := t.Context()
	for _, id := range ids {
		if _, err := s.Put(ctx, artifact.Artifact{ID: id}, strings.NewReader("evil")); !errors.Is(err, artifact.ErrInvalid) {
			t.Errorf("Put(%q) = %v, want ErrInvalid", id, err)
		}
		if a, err := s.Stat(ctx, id); !errors.Is(err, artifact.ErrNotFound) {
			t.Errorf("Stat(%q) = %+v, %v", id, a, err)
		}
		if _, err := s.Open(ctx, id, 0, -1); !errors.Is(err, artifact.ErrNotFound) {
			t.Errorf("Open(%q) = %v", id, err)
		}
		if err := s.Delete(ctx, id); !errors.Is(err, artifact.ErrInvalid) {
			t.Errorf("Delete(%q) = %v", id, err)
		}
	}
	var listed []string
	if err := s.ListExpired(ctx, time.Now().Add(1000*time.Hour), func(id string) error {
		listed = append(listed, id)
		return nil
	}); err != nil || len(listed) != 0 {
		t.Errorf("ListExpired = %v, %v; want nothing", listed, err)
	}
	after := snapshot(t, root)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed", k)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s appeared", k)
		}
	}
}

func TestLayout(t *testing.T) {
	s := newStore(t)
	a, err := s.Put(t.Context(), artifact.Artifact{ID: artifact.NewID(), MimeType: "text/plain", Name: "n"}, strings.NewReader("hello"))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(s.Dir(), a.ID[:2], a.ID)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != headerSize+5 || !bytes.HasPrefix(b, []byte(magic+`{"id":"`+a.ID+`"`)) || string(b[headerSize:]) != "hello" {
		t.Errorf("file is %d bytes starting %q", len(b), b[:min(len(b), 80)])
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("artifact file mode %v, want 0600", fi.Mode().Perm())
	}
	if tmp, _ := os.ReadDir(s.tmp()); len(tmp) != 0 {
		t.Errorf("temporary files left after Put: %v", tmp)
	}
}

func TestCrashLeftovers(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("flock semantics")
	}
	dir := t.TempDir()
	s, err := New(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	mk := func(name string, mtime time.Time) string {
		p := filepath.Join(s.tmp(), name)
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	crashed := mk("put-crashed", old)
	fresh := mk("put-fresh", time.Now())
	live := mk("put-live", old)
	// A live writer in another process holds the lock; another open file
	// description in this process conflicts with flock the same way.
	f, err := os.OpenFile(live, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if ok, err := tryLock(f); !ok || err != nil {
		t.Fatalf("tryLock = %v, %v", ok, err)
	}

	if _, err := New(dir); err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	if exists(crashed) {
		t.Error("New kept the temporary file of a crashed writer")
	}
	if !exists(fresh) {
		t.Error("New removed a temporary file younger than the grace period")
	}
	if !exists(live) {
		t.Error("New removed the temporary file of a live writer")
	}
}

func TestDamaged(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	past := time.Now().Add(-time.Hour)
	var ids []string
	for range 3 {
		a, err := s.Put(ctx, artifact.Artifact{ID: artifact.NewID(), Expires: past}, strings.NewReader("some bytes"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)
	path := func(id string) string { return filepath.Join(s.Dir(), id[:2], id) }
	// One file truncated, one with a broken header.
	if err := os.Truncate(path(ids[0]), headerSize+3); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path(ids[1]), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("garbage"), 0)
	f.Close()
	for _, id := range ids[:2] {
		if _, err := s.Stat(ctx, id); !errors.Is(err, artifact.ErrUnavailable) {
			t.Errorf("Stat of a damaged file: %v, want ErrUnavailable", err)
		}
		if _, err := s.Open(ctx, id, 0, -1); !errors.Is(err, artifact.ErrUnavailable) {
			t.Errorf("Open of a damaged file: %v, want ErrUnavailable", err)
		}
	}
	var listed []string
	err = s.ListExpired(ctx, time.Now(), func(id string) error { listed = append(listed, id); return nil })
	if !errors.Is(err, artifact.ErrUnavailable) || !slices.Equal(listed, ids[2:]) {
		t.Errorf("ListExpired = %v, %v; want %v and an ErrUnavailable", listed, err, ids[2:])
	}
	// A damaged artifact can still be deleted.
	if err := s.Delete(ctx, ids[0]); err != nil {
		t.Errorf("Delete of damaged file: %v", err)
	}
}

func TestUnavailable(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	if err := os.RemoveAll(s.tmp()); err != nil {
		t.Fatal(err)
	}
	// A file where the temporary directory should be: nothing can be written.
	if err := os.WriteFile(s.tmp(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); !errors.Is(err, artifact.ErrUnavailable) {
		t.Errorf("Ping = %v, want ErrUnavailable", err)
	}
	id := artifact.NewID()
	if _, err := s.Put(ctx, artifact.Artifact{ID: id}, strings.NewReader("x")); !errors.Is(err, artifact.ErrUnavailable) {
		t.Errorf("Put = %v, want ErrUnavailable", err)
	}
	if _, err := New(filepath.Join(s.tmp(), "sub")); !errors.Is(err, artifact.ErrUnavailable) {
		t.Errorf("New under a file = %v, want ErrUnavailable", err)
	}
	if _, err := New(""); !errors.Is(err, artifact.ErrInvalid) {
		t.Errorf(`New("") = %v, want ErrInvalid`, err)
	}
}
