package identity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
)

// maxJWKS bounds a key set document fetched from the issuer.
const maxJWKS = 1 << 20

// errUnknownKey is returned when no key of the set fits a token's kid and
// alg, even after the set was fetched again.
var errUnknownKey = errors.New("no key fits the token's kid and alg")

// keySource holds the keys tokens are verified with: a fixed set, or the
// issuer's JWKS fetched over HTTP(S), kept, and fetched again when a token
// names a kid it lacks (an issuer rotating its keys) or once it is older
// than maxAge. Fetches are serialized and, after the first successful one,
// at most one per minGap: a flood of tokens with made-up kids costs the
// issuer one request per minGap, and the caller a refusal. Safe for
// concurrent use.
type keySource struct {
	url    string
	client *http.Client
	minGap time.Duration
	maxAge time.Duration
	log    *slog.Logger

	set atomic.Pointer[keySet]
	mu  sync.Mutex // held while fetching
	try time.Time  // the last fetch attempt; under mu
}

type keySet struct {
	set     jwk.Set
	fetched time.Time
}

// newStaticKeys returns a keySource of the public keys of set.
func newStaticKeys(set jwk.Set) (*keySource, error) {
	pub, err := jwk.PublicSetOf(set)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	k := &keySource{}
	k.set.Store(&keySet{set: pub})
	return k, nil
}

// key returns the key a token with header h is verified with.
func (k *keySource) key(ctx context.Context, h joseHeader) (jwk.Key, error) {
	cur := k.set.Load()
	if cur != nil {
		if key, ok := pick(cur.set, h); ok && (k.url == "" || time.Since(cur.fetched) < k.maxAge) {
			return key, nil
		}
	}
	if k.url == "" {
		return nil, errUnknownKey
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	// Another request may have fetched the set while this one waited.
	if now := k.set.Load(); now != cur {
		cur = now
		if key, ok := pick(cur.set, h); ok {
			return key, nil
		}
	}
	if time.Since(k.try) < k.minGap {
		if cur != nil {
			if key, ok := pick(cur.set, h); ok {
				return key, nil // stale but the freshest allowed
			}
		}
		return nil, errUnknownKey
	}
	first := cur == nil
	k.try = time.Now()
	set, err := k.fetch(ctx)
	if err == nil && first {
		// Loading the keys is no refetch: the first rotation after it
		// may fetch at once.
		k.try = time.Time{}
	}
	if err != nil {
		k.log.Warn("cannot fetch the OAuth issuer's JWKS; keeping the keys fetched before", "jwks_url", k.url, "err", err)
		if cur != nil {
			if key, ok := pick(cur.set, h); ok {
				return key, nil
			}
		}
		return nil, fmt.Errorf("%w (the issuer's keys are unavailable)", errUnknownKey)
	}
	k.set.Store(&keySet{set: set, fetched: time.Now()})
	if key, ok := pick(set, h); ok {
		return key, nil
	}
	return nil, errUnknownKey
}

// fetch GETs the JWKS and returns its public keys.
func (k *keySource) fetch(ctx context.Context) (jwk.Set, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKS+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxJWKS {
		return nil, fmt.Errorf("key set larger than %d bytes", maxJWKS)
	}
	set, err := jwk.Parse(b)
	if err != nil {
		return nil, err
	}
	return jwk.PublicSetOf(set)
}

// pick returns the key of set that h's token is verified with: the one
// with h's kid; else (a token without kid, or a set of keys without kids,
// as PEM keys are) the only key without a kid, or for a token without kid
// the only key, that fits h's alg. The key must fit the alg (see fits).
func pick(set jwk.Set, h joseHeader) (jwk.Key, bool) {
	if h.kid != "" {
		if key, ok := set.LookupKeyID(h.kid); ok {
			return key, fits(key, h.alg)
		}
	}
	var found jwk.Key
	for i := range set.Len() {
		key, _ := set.Key(i)
		if kid, _ := key.KeyID(); h.kid != "" && kid != "" {
			continue
		}
		if fits(key, h.alg) {
			if found != nil {
				return nil, false // ambiguous: the token must name its key
			}
			found = key
		}
	}
	return found, found != nil
}

// fits reports whether key may verify a signature of alg: its type (and
// curve) is the algorithm's, its use (if set) is "sig" and its own alg (if
// set) is alg. An HMAC alg fits no key here: no key set holds a secret.
func fits(key jwk.Key, alg string) bool {
	if a, ok := key.Algorithm(); ok && a.String() != alg {
		return false
	}
	var use string
	if key.Get(jwk.KeyUsageKey, &use) == nil && use != "" && use != "sig" {
		return false
	}
	switch alg {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		return key.KeyType() == jwa.RSA()
	case "ES256", "ES384", "ES512":
		ec, ok := key.(jwk.ECDSAPublicKey)
		if !ok {
			return false
		}
		crv, _ := ec.Crv()
		want := map[string]jwa.EllipticCurveAlgorithm{"ES256": jwa.P256(), "ES384": jwa.P384(), "ES512": jwa.P521()}[alg]
		return crv == want
	case "EdDSA":
		return key.KeyType() == jwa.OKP()
	}
	return false
}
