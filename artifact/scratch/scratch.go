// Package scratch makes unlinked temporary files: a file is created and
// its name removed at once, so its bytes live only as long as its open
// descriptors and are gone when the last is closed, even if the process
// dies first. The proxy's spill files and long jq answers, the artifact
// service's stagings and the previewer's kept images all use it, so the
// idea is written once.
package scratch

import "os"

// Create creates a new file in dir ("": os.TempDir()), named from pattern
// as os.CreateTemp names it, and removes its name at once. It returns
// os.CreateTemp's error unchanged when the file cannot be made. When the
// name cannot be removed (a file system that refuses to remove an open
// file), Create closes the file and returns an *UnlinkError, so a file it
// returns never outlives its descriptor.
func Create(dir, pattern string) (*os.File, error) {
	f, unlinkErr, err := create(dir, pattern)
	if err != nil {
		return nil, err
	}
	if unlinkErr != nil {
		f.Close()
		return nil, &UnlinkError{Err: unlinkErr}
	}
	return f, nil
}

// CreateBestEffort is Create for a caller that would rather keep a named
// file than fail: when the name cannot be removed, it returns the open
// file all the same, and that file stays on disk after it is closed.
func CreateBestEffort(dir, pattern string) (*os.File, error) {
	f, _, err := create(dir, pattern)
	return f, err
}

// create makes the file and tries to remove its name: err is
// os.CreateTemp's (and f nil), unlinkErr os.Remove's (with f open).
func create(dir, pattern string) (f *os.File, unlinkErr, err error) {
	f, err = os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, nil, err
	}
	return f, os.Remove(f.Name()), nil
}

// UnlinkError is Create's error when the file was made but its name could
// not be removed; the file is closed. Its text is os.Remove's, and it
// unwraps to os.Remove's error (an *fs.PathError).
type UnlinkError struct {
	Err error
}

func (e *UnlinkError) Error() string { return e.Err.Error() }

func (e *UnlinkError) Unwrap() error { return e.Err }
