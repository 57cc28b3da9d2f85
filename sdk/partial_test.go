package sdk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/spillway-dev/spillway/sdk"
)

// rangeServer is a real loopback server of data whose first answer is cut
// after cut bytes; a Range request is answered by answer(start) with the
// bytes and the Content-Range it returns. It records each Range asked.
func rangeServer(t *testing.T, data []byte, cut int, answer func(start int) ([]byte, string)) (url string, ranges func() []string) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Range"))
		first := len(seen) == 1
		mu.Unlock()
		rng := r.Header.Get("Range")
		if rng == "" {
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			if first && cut > 0 {
				w.Write(data[:cut])
				w.(http.Flusher).Flush()
				panic(http.ErrAbortHandler) // the connection breaks mid-body
			}
			w.Write(data)
			return
		}
		start, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rng, "bytes="), "-"))
		body, cr := answer(start)
		w.Header().Set("Content-Range", cr)
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusPartialContent)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func pattern(n int) []byte { return bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n] }

// A 206 counts for the range its Content-Range names, no more: a server
// that sends a shorter range than asked is asked for the rest (not taken
// for a broken connection that uses up the retries), and one whose body
// or Content-Range disagrees with what was asked is refused.
func TestPartialAnswers(t *testing.T) {
	data := pattern(1000)
	ctx := context.Background()
	fetch := func(url string) ([]byte, error) {
		var b bytes.Buffer
		_, err := sdk.Fetch(ctx, nil, url, &b, sdk.FetchOptions{Retries: 2})
		return b.Bytes(), err
	}

	url, ranges := rangeServer(t, data, 100, func(start int) ([]byte, string) {
		end := min(start+100, len(data)) - 1
		return data[start : end+1], fmt.Sprintf("bytes %d-%d/%d", start, end, len(data))
	})
	got, err := fetch(url)
	if err != nil || !bytes.Equal(got, data) {
		t.Errorf("100 bytes a range: %d bytes, %v", len(got), err)
	}
	if r := ranges(); len(r) != 10 || r[1] != "bytes=100-" || r[9] != "bytes=900-" {
		t.Errorf("ranges asked: %q", r)
	}

	for name, answer := range map[string]func(int) ([]byte, string){
		"more bytes than the range": func(start int) ([]byte, string) {
			return data[start:], fmt.Sprintf("bytes %d-%d/%d", start, start+99, len(data))
		},
		"another start": func(start int) ([]byte, string) {
			return data, fmt.Sprintf("bytes 0-%d/%d", len(data)-1, len(data))
		},
		"another length": func(start int) ([]byte, string) {
			return data[start:], fmt.Sprintf("bytes %d-%d/%d", start, len(data)-1, 2*len(data))
		},
	} {
		url, _ := rangeServer(t, data, 100, answer)
		if _, err := fetch(url); !errors.Is(err, sdk.ErrIntegrity) {
			t.Errorf("%s: %v", name, err)
		}
	}

	partial := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-99/%d", len(data)))
		w.WriteHeader(http.StatusPartialContent)
		io.Copy(w, bytes.NewReader(data[:100]))
	}))
	defer partial.Close()
	if _, err := fetch(partial.URL); !errors.Is(err, sdk.ErrIntegrity) {
		t.Errorf("a 206 to a request without Range: %v", err)
	}
}
