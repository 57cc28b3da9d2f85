package sdk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/sdk"
)

// A link carries its token id; Revoke with it stops that link on the real
// service and leaves the artifact's other links working.
func TestRevokeOneLink(t *testing.T) {
	ctx := context.Background()
	data := []byte("revocable bytes")
	c, l := uploaded(t, data)
	other, err := c.Mint(ctx, l.ID(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l.TokenID == "" || other.TokenID == "" || l.TokenID == other.TokenID {
		t.Fatalf("token ids %q and %q", l.TokenID, other.TokenID)
	}
	if err := c.Revoke(ctx, l.ID(), l.TokenID); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if _, err := c.FetchBytes(ctx, l); !errors.Is(err, sdk.ErrDenied) {
		t.Errorf("revoked link: %v", err)
	}
	if got, err := c.FetchBytes(ctx, other); err != nil || !bytes.Equal(got, data) {
		t.Errorf("the artifact's other link: %q, %v", got, err)
	}
	if err := c.Revoke(ctx, l.ID(), l.TokenID); err != nil {
		t.Errorf("revoking twice: %v", err)
	}
	if err := c.Revoke(ctx, "no-such-artifact", l.TokenID); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("revoke on an unknown artifact: %v", err)
	}
	if err := c.Revoke(ctx, l.ID(), "not.an.id"); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("malformed token id: %v", err)
	}
	if err := c.Revoke(ctx, l.ID(), ""); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("no token id: %v", err)
	}
}

// Revocations are bounded per artifact on the service; past the bound
// Revoke says so with its own sentinel, and the links still work.
func TestRevokeLimit(t *testing.T) {
	ctx := context.Background()
	c, l := uploaded(t, []byte("many revocations"))
	var err error
	n := 0
	for ; n < 1000 && err == nil; n++ {
		err = c.Revoke(ctx, l.ID(), fmt.Sprintf("never-minted-%d", n))
	}
	var se *sdk.Error
	if !errors.Is(err, sdk.ErrRevocationLimit) || !errors.As(err, &se) || se.Status != http.StatusConflict {
		t.Fatalf("revocation %d: %v", n, err)
	}
	if errors.Is(&sdk.Error{Status: http.StatusConflict, Code: "exists"}, sdk.ErrRevocationLimit) {
		t.Error("another conflict taken for the revocation limit")
	}
	if _, err := c.FetchBytes(ctx, l); err != nil {
		t.Errorf("the artifact's link after the limit: %v", err)
	}
}

// MintWith asks the real service for what its API accepts: a network, HEAD
// only, an audience; each narrows the link as the service enforces it.
func TestMintNarrowed(t *testing.T) {
	ctx := context.Background()
	data := []byte("narrow me")
	c, l := uploaded(t, data)
	mint := func(o sdk.MintOptions) sdk.Link {
		t.Helper()
		m, err := c.MintWith(ctx, l.ID(), o)
		if err != nil {
			t.Fatalf("mint %+v: %v", o, err)
		}
		return m
	}

	here := mint(sdk.MintOptions{CIDR: netip.MustParsePrefix("127.0.0.1/32"), TTL: time.Minute})
	if got, err := c.FetchBytes(ctx, here); err != nil || !bytes.Equal(got, data) {
		t.Errorf("link bound to the loopback address: %q, %v", got, err)
	}
	if left := time.Until(here.ExpiresAt); left <= 0 || left > time.Minute+5*time.Second {
		t.Errorf("a one-minute link expires in %v", left)
	}
	elsewhere := mint(sdk.MintOptions{CIDR: netip.MustParsePrefix("192.0.2.0/24")})
	if _, err := c.FetchBytes(ctx, elsewhere); !errors.Is(err, sdk.ErrDenied) {
		t.Errorf("link bound to another network: %v", err)
	}

	head := mint(sdk.MintOptions{HeadOnly: true})
	if _, err := c.FetchBytes(ctx, head); !errors.Is(err, sdk.ErrDenied) {
		t.Errorf("GET with a HEAD-only link: %v", err)
	}
	resp, err := http.Head(head.HTTPURL)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != int64(len(data)) {
		t.Errorf("HEAD with a HEAD-only link = %d, %d bytes", resp.StatusCode, resp.ContentLength)
	}

	aud := mint(sdk.MintOptions{Audience: "sandbox-7"})
	if got, err := c.FetchBytes(ctx, aud); err != nil || !bytes.Equal(got, data) {
		t.Errorf("link with an audience: %q, %v", got, err)
	}

	if _, err := c.MintWith(ctx, "no-such-artifact", sdk.MintOptions{}); !errors.Is(err, sdk.ErrNotFound) {
		t.Errorf("mint for an unknown artifact: %v", err)
	}
}

// uploaded starts a real service and stores data in it.
func uploaded(t *testing.T, data []byte) (*sdk.Client, sdk.Link) {
	t.Helper()
	c := client(t)
	l, err := c.Upload(context.Background(), bytes.NewReader(data), sdk.UploadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c, l
}
