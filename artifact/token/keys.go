package token

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ParseKeys parses signing keys written as "id:base64secret" separated by
// commas or newlines; the first key signs, all verify. Lines starting with #
// are comments.
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

// LoadOrCreateKeyFile reads keys from path in ParseKeys format, creating the
// file with one fresh 256-bit key (mode 0600) when it does not exist, so a
// restart keeps every link valid. It never generates a key when the file
// exists but is unreadable or empty.
func LoadOrCreateKeyFile(path string) ([]Key, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, err
		}
		secret := make([]byte, 32)
		rand.Read(secret)
		var id [6]byte
		rand.Read(id[:])
		line := "k" + base64.RawURLEncoding.EncodeToString(id[:]) + ":" + base64.StdEncoding.EncodeToString(secret) + "\n"
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create key file: %w", err)
		}
		w := bufio.NewWriter(f)
		w.WriteString("# Spillway URL-signing keys: id:base64secret, first line signs. Keep secret.\n" + line)
		if err := w.Flush(); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
		return ParseKeys(line)
	}
	if err != nil {
		return nil, fmt.Errorf("read key file: %w", err)
	}
	keys, err := ParseKeys(string(b))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return keys, nil
}
