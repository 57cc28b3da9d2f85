package artifact

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNormalize(t *testing.T) {
	id := NewID()
	ok := Artifact{ID: id, SHA256: strings.Repeat("AB", 32), Created: time.Unix(5, 0).In(time.FixedZone("x", 3600))}
	got, err := Normalize(ok)
	if err != nil || got.MimeType != "application/octet-stream" || got.SHA256 != strings.Repeat("ab", 32) || got.Created.Location() != time.UTC {
		t.Fatalf("Normalize = %+v, %v", got, err)
	}
	tests := []struct {
		name    string
		meta    Artifact
		wantErr string
	}{
		{"bad id", Artifact{ID: "../x"}, "malformed id"},
		{"negative size", Artifact{ID: id, Size: -1}, "negative size"},
		{"short digest", Artifact{ID: id, SHA256: "abc"}, "64 hex digits"},
		{"mime control", Artifact{ID: id, MimeType: "text/plain\n"}, "mime type"},
		{"long name", Artifact{ID: id, Name: strings.Repeat("n", 256)}, "name longer than 255"},
		{"long tenant", Artifact{ID: id, Tenant: strings.Repeat("t", 129)}, "tenant longer than 128"},
		{"source not utf-8", Artifact{ID: id, Source: "\xff"}, "source is not UTF-8"},
		{"year 10000", Artifact{ID: id, Expires: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, "years 1-9999"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Normalize(tt.meta)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want ErrInvalid with %q", err, tt.wantErr)
			}
		})
	}
}
