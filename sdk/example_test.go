package sdk_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/spillway-dev/spillway/sdk"
)

// A sandbox receives a resource_link (here as JSON, the way a tool result
// carries it) and fetches the whole artifact with one plain GET, checked
// against the size and SHA-256 the link names. The loopback server stands
// in for Spillway's fetch endpoint.
func ExampleFetch() {
	report := []byte("order,total\n1,9.99\n2,24.50\n")
	srv := serve(report)
	defer srv.Close()
	link := linkTo(srv.URL, report)

	var buf bytes.Buffer
	n, err := sdk.Fetch(context.Background(), nil, link.HTTPURL, &buf, sdk.FetchOptions{
		SHA256:        link.SHA256, // refuse bytes that are not the ones the link names
		RequireSHA256: true,        // and refuse to fetch unchecked
		Size:          link.Size,
		ExpiresAt:     link.ExpiresAt,
	})
	if err != nil {
		fmt.Println("fetch:", err)
		return
	}
	fmt.Printf("%s: %d bytes, size and SHA-256 checked\n%s", link.Name, n, buf.Bytes())
	// Output:
	// report.csv: 27 bytes, size and SHA-256 checked
	// order,total
	// 1,9.99
	// 2,24.50
}

// When the bytes served are not the ones the link was minted for, Fetch
// fails with ErrIntegrity: what it already wrote to w must be thrown away.
func ExampleFetch_integrity() {
	srv := serve([]byte("order,total\n1,9.99\n2,99.99\n")) // not the report the link names
	defer srv.Close()
	link := linkTo(srv.URL, []byte("order,total\n1,9.99\n2,24.50\n"))

	var buf bytes.Buffer
	_, err := sdk.Fetch(context.Background(), nil, link.HTTPURL, &buf, sdk.FetchOptions{SHA256: link.SHA256, Size: link.Size})
	fmt.Println("integrity error:", errors.Is(err, sdk.ErrIntegrity))
	// Output:
	// integrity error: true
}

// serve answers every GET with body, Range requests included.
func serve(body []byte) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "report.csv", time.Time{}, bytes.NewReader(body))
	}))
}

// linkTo is the resource_link a tool result would carry for an artifact
// with the bytes want, served at base.
func linkTo(base string, want []byte) sdk.Link {
	sum := sha256.Sum256(want)
	block := fmt.Sprintf(`{"type": "resource_link", "uri": "spillway://artifacts/a1", "name": "report.csv",
		"mimeType": "text/csv", "size": %d, "httpUrl": %q, "httpUrlExpiresAt": "2099-01-01T00:00:00Z",
		"_meta": {"dev.spillway/sha256": %q}}`, len(want), base+"/a/a1?t=token", hex.EncodeToString(sum[:]))
	var l sdk.Link
	if err := json.Unmarshal([]byte(block), &l); err != nil {
		panic(err)
	}
	return l
}
