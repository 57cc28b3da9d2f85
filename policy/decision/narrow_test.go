package decision

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func TestNarrow(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		requireCIDR, requireAu string
		cidr, audience         string // asked for; "" = none
		wantCIDR, wantAudience string
		wantErr                string // substring; "" = no error
		widen                  bool   // the error wraps ErrWiden
	}{
		{name: "no bindings keep the request", cidr: "10.1.2.3/32", audience: "a", wantCIDR: "10.1.2.3/32", wantAudience: "a"},
		{name: "no bindings, nothing asked", wantCIDR: "invalid Prefix"},
		{name: "required, nothing asked", requireCIDR: "10.88.0.0/16", wantCIDR: "10.88.0.0/16"},
		{name: "a /32 inside is kept (the finding)", requireCIDR: "10.88.0.0/16", cidr: "10.88.1.2/32", wantCIDR: "10.88.1.2/32"},
		{name: "a /24 inside is kept", requireCIDR: "10.88.0.0/16", cidr: "10.88.7.0/24", wantCIDR: "10.88.7.0/24"},
		{name: "the same prefix is kept", requireCIDR: "10.88.0.0/16", cidr: "10.88.0.0/16", wantCIDR: "10.88.0.0/16"},
		{name: "required not masked", requireCIDR: "10.88.9.9/16", cidr: "10.88.1.2/32", wantCIDR: "10.88.1.2/32"},
		{name: "outside is refused", requireCIDR: "10.88.0.0/16", cidr: "192.168.1.2/32", wantErr: "192.168.1.2/32 is not inside 10.88.0.0/16", widen: true},
		{name: "wider is refused", requireCIDR: "10.88.0.0/16", cidr: "10.88.0.0/15", wantErr: "not inside", widen: true},
		{name: "a supernet is refused", requireCIDR: "10.88.0.0/16", cidr: "10.0.0.0/8", wantErr: "not inside", widen: true},
		{name: "another family is refused", requireCIDR: "10.88.0.0/16", cidr: "::ffff:10.88.1.2/128", wantErr: "not inside", widen: true},
		{name: "IPv6 inside", requireCIDR: "fd00::/8", cidr: "fd00::1/128", wantCIDR: "fd00::1/128"},
		{name: "bad require_cidr", requireCIDR: "10.88.0.0", wantErr: "bad require_cidr"},
		{name: "audience required, none asked", requireAu: "sandbox", wantCIDR: "invalid Prefix", wantAudience: "sandbox"},
		{name: "audience the same", requireAu: "sandbox", audience: "sandbox", wantCIDR: "invalid Prefix", wantAudience: "sandbox"},
		{name: "another audience is refused", requireAu: "sandbox", audience: "ops", wantErr: `audience "ops" is not "sandbox"`, widen: true},
		{name: "both bound", requireCIDR: "10.88.0.0/16", requireAu: "sandbox", cidr: "10.88.1.2/32", wantCIDR: "10.88.1.2/32", wantAudience: "sandbox"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked netip.Prefix
			if tc.cidr != "" {
				asked = netip.MustParsePrefix(tc.cidr)
			}
			d := Mint{Allow: true, RequireCIDR: tc.requireCIDR, Audience: tc.requireAu}
			cidr, aud, err := d.Narrow(asked, tc.audience)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errors.Is(err, ErrWiden) != tc.widen {
					t.Fatalf("err = %v, want %q (ErrWiden %v)", err, tc.wantErr, tc.widen)
				}
				return
			}
			if err != nil || cidr.String() != tc.wantCIDR || aud != tc.wantAudience {
				t.Fatalf("= %s %q %v, want %s %q", cidr, aud, err, tc.wantCIDR, tc.wantAudience)
			}
		})
	}
}
