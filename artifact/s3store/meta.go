package s3store

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/spillway-dev/spillway/artifact"
)

// User metadata keys (sent as x-amz-meta-<key>). Size is the object's own,
// MimeType its Content-Type.
const (
	keyName    = "Spillway-Name"
	keySHA256  = "Spillway-Sha256"
	keyCreated = "Spillway-Created"
	keyExpires = "Spillway-Expires"
	keyTenant  = "Spillway-Tenant"
	keySource  = "Spillway-Source"
	// keyCall holds the call that produced the artifact (artifact.Call,
	// bounded so that it fits beside the rest) as a URL query; absent when
	// none was recorded.
	keyCall = "Spillway-Call"
	// keyPending marks an object whose upload completed but whose metadata
	// is not final yet (see Put); it is not an artifact.
	keyPending = "Spillway-Pending"
)

// encodeMeta returns a's metadata as user metadata. Free text is
// percent-encoded: header values must be ASCII, and S3 services differ in
// how they treat anything else.
func encodeMeta(a artifact.Artifact, pending bool) map[string]string {
	m := map[string]string{}
	set := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	set(keyName, url.QueryEscape(a.Name))
	set(keyTenant, url.QueryEscape(a.Tenant))
	set(keySource, url.QueryEscape(a.Source))
	set(keyCall, encodeCall(a.Call))
	if !a.Created.IsZero() {
		m[keyCreated] = a.Created.UTC().Format(time.RFC3339Nano)
	}
	if !a.Expires.IsZero() {
		m[keyExpires] = a.Expires.UTC().Format(time.RFC3339Nano)
	}
	if pending {
		m[keyPending] = "1"
	} else {
		m[keySHA256] = a.SHA256
	}
	return m
}

// errIncomplete marks an object that is not (yet) an artifact.
var errIncomplete = errors.New("object has no final artifact metadata")

// decodeMeta rebuilds id's metadata from an object's response headers.
func decodeMeta(id string, info minio.ObjectInfo) (artifact.Artifact, error) {
	return decode(id, info.Size, info.ContentType, headerGetter(info.Metadata))
}

func headerGetter(h http.Header) func(string) string {
	return func(k string) string { return h.Get("X-Amz-Meta-" + k) }
}

// mapGetter looks keys up case-insensitively, with or without the
// x-amz-meta- prefix, as listings return them in either form.
func mapGetter(m map[string]string) func(string) string {
	return func(k string) string {
		for mk, v := range m {
			mk = strings.TrimPrefix(strings.ToLower(mk), "x-amz-meta-")
			if strings.EqualFold(mk, k) {
				return v
			}
		}
		return ""
	}
}

func decode(id string, size int64, contentType string, get func(string) string) (artifact.Artifact, error) {
	if get(keyPending) != "" || get(keySHA256) == "" {
		return artifact.Artifact{}, errIncomplete
	}
	a := artifact.Artifact{ID: id, Size: size, MimeType: contentType, SHA256: get(keySHA256)}
	var errs []error
	unescape := func(k string) string {
		v, err := url.QueryUnescape(get(k))
		errs = append(errs, err)
		return v
	}
	parseTime := func(k string) time.Time {
		v := get(k)
		if v == "" {
			return time.Time{}
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		errs = append(errs, err)
		return t.UTC()
	}
	a.Name, a.Tenant, a.Source = unescape(keyName), unescape(keyTenant), unescape(keySource)
	a.Created, a.Expires = parseTime(keyCreated), parseTime(keyExpires)
	var err error
	a.Call, err = decodeCall(get(keyCall))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return artifact.Artifact{}, fmt.Errorf("damaged metadata: %w", err)
	}
	return a, nil
}

// The names of a Call's fields in keyCall's query.
const (
	callUpstream = "u"
	callTool     = "t"
	callRequest  = "r"
	callSession  = "s"
	callTrace    = "tr"
	callSpan     = "sp"
)

// encodeCall writes c as a URL query of its non-empty fields; "" for the
// zero Call. Bounded fields hold nothing a query's value must escape but
// the quotes of a string request id (written %22): at most 239 bytes,
// which the other fields at their limits leave room for under S3's 2 KB
// (testProvenance). url.Values.Encode would escape ':' and '/' too.
func encodeCall(c artifact.Call) string {
	var b strings.Builder
	for _, f := range [...]struct{ k, v string }{{callUpstream, c.Upstream}, {callTool, c.Tool},
		{callRequest, c.RequestID}, {callSession, c.Session}, {callTrace, c.TraceID}, {callSpan, c.SpanID}} {
		if f.v == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(f.k + "=" + strings.ReplaceAll(f.v, `"`, "%22"))
	}
	return b.String()
}

// decodeCall reads what encodeCall wrote; "" is the zero Call.
func decodeCall(s string) (artifact.Call, error) {
	if s == "" {
		return artifact.Call{}, nil
	}
	v, err := url.ParseQuery(s)
	if err != nil {
		return artifact.Call{}, fmt.Errorf("call: %w", err)
	}
	return artifact.Call{Upstream: v.Get(callUpstream), Tool: v.Get(callTool), RequestID: v.Get(callRequest),
		Session: v.Get(callSession), TraceID: v.Get(callTrace), SpanID: v.Get(callSpan)}, nil
}
