package token

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ParseKeys parses signing keys written as "id:base64secret" separated by
// commas or newlines; the first key signs, all verify. Lines starting with #
// are comments. It fails for an item without a colon, a secret that is not
// base64 (standard or URL alphabet), or no key at all; NewSigner checks ids
// and secret lengths.
func ParseKeys(s string) ([]Key, error) {
	var keys []Key
	var items []string
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); !strings.HasPrefix(line, "#") {
			items = append(items, strings.Split(line, ",")...)
		}
	}
	for _, line := range items {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		id, secret, ok := strings.Cut(line, ":")
		if !ok {
			return nil, errors.New("token: key must be written id:base64secret")
		}
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(secret))
		if err != nil {
			if b, err = base64.RawURLEncoding.DecodeString(strings.TrimSpace(secret)); err != nil {
				return nil, fmt.Errorf("token: key %q: secret is not base64", id)
			}
		}
		keys = append(keys, Key{ID: strings.TrimSpace(id), Secret: b})
	}
	if len(keys) == 0 {
		return nil, errors.New("token: no keys")
	}
	return keys, nil
}

// MaxSecretFile is the largest file ReadSecretFile reads.
const MaxSecretFile = 16 << 20

// ReadSecretFile reads a file that holds secrets (signing keys, inbound
// tokens, storage credentials), of at most MaxSecretFile bytes. On Unix it
// refuses a file that other users could read or change, so that a leak by
// file mode is an error at start, not a silent exposure. The rule fits
// Kubernetes secret volumes (see checkSecretMode): it accepts 0600 and
// 0400, 0440 or 0640 with a group of this process's, and any read bits in
// a projected volume. Elsewhere (Windows) it checks no mode. The error for
// a missing file wraps fs.ErrNotExist.
func ReadSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkSecretMode(path, fi); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(f, MaxSecretFile+1)); err != nil {
		return nil, err
	}
	if b.Len() > MaxSecretFile {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, MaxSecretFile)
	}
	return b.Bytes(), nil
}

// LoadKeyFile reads keys from path in ParseKeys format, with
// ReadSecretFile's mode check. A missing file is an error wrapping
// fs.ErrNotExist.
func LoadKeyFile(path string) ([]Key, error) {
	b, err := ReadSecretFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key file: %w", err)
	}
	keys, err := ParseKeys(string(b))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return keys, nil
}

// LoadOrCreateKeyFile reads keys from path (LoadKeyFile), creating the file
// with one fresh 256-bit key (mode 0600) when it does not exist, so a
// restart keeps every link valid. It never generates a key when the file
// exists but is unreadable, too open or empty: it returns LoadKeyFile's
// error. The file is written under a temporary name and linked into place
// complete and synced, so a failed first write leaves no file behind, and
// when two processes create it at once both read the file of the one that
// won.
func LoadOrCreateKeyFile(path string) ([]Key, error) {
	keys, err := LoadKeyFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return keys, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create key file: %w", err)
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	var id [6]byte
	rand.Read(id[:])
	content := "# Spillway URL-signing keys: id:base64secret, first line signs. Keep secret.\n" +
		"k" + base64.RawURLEncoding.EncodeToString(id[:]) + ":" + base64.StdEncoding.EncodeToString(secret) + "\n"
	if err := createFile(path, []byte(content)); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create key file: %w", err)
	}
	return LoadKeyFile(path)
}

// createFile makes path hold b, or fails with fs.ErrExist when path exists.
// It writes a temporary file (0600) in the same directory, syncs it, links
// it to path and syncs the directory. It links rather than renames because
// link(2), unlike rename(2), never replaces an existing file.
func createFile(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(f.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		err = d.Sync()
		d.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// DefaultKeyPoll is how often WatchKeyFile reads the key file unless told
// otherwise. It bounds, on every replica, the time between a key file
// change (a key retired) and the links that change affects failing to
// verify.
const DefaultKeyPoll = time.Second

// WatchKeyFile reads path every interval (DefaultKeyPoll when zero or
// less) and installs its keys in s whenever the content changes, so keys
// rotate and retire without a restart. It blocks until ctx ends; run it in
// a goroutine of its own. A file that cannot be read, is too open, or does
// not parse leaves the keys as they are; its error is logged when it first
// occurs and again only when it changes. Replace the file atomically
// (write another and rename it over, as Kubernetes does with secret
// volumes): a reader that catches a half-written file may see fewer keys
// for one interval. A nil log is slog.Default().
func WatchKeyFile(ctx context.Context, path string, s *Signer, every time.Duration, log *slog.Logger) {
	if every <= 0 {
		every = DefaultKeyPoll
	}
	if log == nil {
		log = slog.Default()
	}
	// The first poll installs whatever the file holds: it may have changed
	// between s being built and this goroutine starting.
	var last []byte
	var lastErr string
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b, err := ReadSecretFile(path)
		if err == nil && bytes.Equal(b, last) {
			lastErr = ""
			continue
		}
		var keys []Key
		if err == nil {
			keys, err = ParseKeys(string(b))
		}
		if err == nil {
			err = s.SetKeys(keys[0], keys[1:]...)
		}
		if err != nil {
			if err.Error() != lastErr {
				log.Error("key file not reloaded; the previous keys stay in use", "path", path, "err", err)
				lastErr = err.Error()
			}
			continue
		}
		changed := s.SigningKeyID() != keys[0].ID || last != nil
		last, lastErr = b, ""
		if !changed {
			continue
		}
		ids := make([]string, len(keys))
		for i, k := range keys {
			ids[i] = k.ID
		}
		log.Info("signing keys reloaded", "path", path, "signing", keys[0].ID, "keys", ids)
	}
}
