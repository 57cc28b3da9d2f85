package scratch_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/spillway-dev/spillway/artifact/scratch"
)

// entries lists what dir holds.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestCreateIsNamelessAndUsable(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("an open file cannot be removed on windows")
	}
	for name, create := range map[string]func(string, string) (*os.File, error){
		"Create": scratch.Create, "CreateBestEffort": scratch.CreateBestEffort,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			f, err := create(dir, "x-*")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got := entries(t, dir); len(got) != 0 {
				t.Fatalf("dir holds %v, want nothing", got)
			}
			if _, err := f.WriteString("hello"); err != nil {
				t.Fatal(err)
			}
			b := make([]byte, 5)
			if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			if string(b) != "hello" {
				t.Fatalf("read back %q", b)
			}
		})
	}
}

func TestCreateFailsAsCreateTemp(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for name, create := range map[string]func(string, string) (*os.File, error){
		"Create": scratch.Create, "CreateBestEffort": scratch.CreateBestEffort,
	} {
		f, err := create(missing, "x-*")
		if f != nil || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: got %v, %v; want nil and a not-exist error", name, f, err)
		}
		var unlink *scratch.UnlinkError
		if errors.As(err, &unlink) {
			t.Errorf("%s: a failed create reported as %T", name, unlink)
		}
	}
}

func TestUnlinkErrorIsRemoves(t *testing.T) {
	inner := &fs.PathError{Op: "remove", Path: "/x", Err: fs.ErrPermission}
	var err error = &scratch.UnlinkError{Err: inner}
	if err.Error() != inner.Error() {
		t.Errorf("text %q, want %q", err.Error(), inner.Error())
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Error("does not unwrap to os.Remove's error")
	}
}
