package policy_test

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/artifact"
	"github.com/spillway-dev/spillway/artifact/fsstore"
	"github.com/spillway-dev/spillway/artifact/token"
	"github.com/spillway-dev/spillway/policy"
)

// Finding 6, as reported: with the hardened example policy (require_cidr
// 10.88.0.0/16), a link asked for a /32 is signed for that /32, not for
// the whole /16; one outside the sandbox network, or wider, is refused;
// none asked gets the /16.
func TestHardenedMintNarrows(t *testing.T) {
	ctx := context.Background()
	eng, err := policy.New(ctx, policy.Options{Dir: "../examples/policies/hardened", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	store, err := fsstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	signer, err := token.NewSigner(token.Key{ID: "k", Secret: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("http://127.0.0.1:1")
	svc := &artifact.Service{Store: store, Signer: signer, PublicURL: u, Mint: eng}
	a, _, err := svc.Publish(ctx, artifact.Artifact{MimeType: "text/csv", Tenant: "acme"}, strings.NewReader("a,b\n"),
		artifact.LinkOptions{Tenant: "acme", Source: "api"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ asked, want, wantErr string }{
		{"10.88.1.2/32", "10.88.1.2/32", ""},
		{"10.88.4.0/24", "10.88.4.0/24", ""},
		{"", "10.88.0.0/16", ""},
		{"192.168.1.2/32", "", "not inside 10.88.0.0/16"},
		{"10.0.0.0/8", "", "not inside 10.88.0.0/16"},
	} {
		o := artifact.LinkOptions{Tenant: "acme", Source: "api"}
		if tc.asked != "" {
			o.CIDR = netip.MustParsePrefix(tc.asked)
		}
		l, err := svc.Link(ctx, a, o)
		if tc.wantErr != "" {
			var denied *artifact.DeniedError
			if !errors.As(err, &denied) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %v, want a denial saying %q", tc.asked, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.asked, err)
		}
		lu, _ := url.Parse(l.URL)
		c, err := signer.Verify(lu.Query().Get("t"), a.ID, time.Now())
		if err != nil || c.CIDR.String() != tc.want {
			t.Errorf("asked %q: signed for %s (%v), want %s", tc.asked, c.CIDR, err, tc.want)
		}
	}
}
