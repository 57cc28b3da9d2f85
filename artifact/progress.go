package artifact

import (
	"context"
	"io"
)

// progressKey carries a store call's progress function in its context.
type progressKey struct{}

// WithProgress returns ctx carrying f, which a caller uses to bound a
// store call by its progress rather than by a fixed total: f is called
// with the number of bytes each time some move, by ProgressReader and by
// a Store that sends bytes some time after it read them (an S3 part,
// buffered whole, then uploaded), and with 0 when ProgressReader's source
// ends (its end is progress too). f must be safe for concurrent use and
// quick.
func WithProgress(ctx context.Context, f func(n int64)) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

// ReportProgress tells ctx's progress function (WithProgress), if any,
// that n bytes moved.
func ReportProgress(ctx context.Context, n int64) {
	if f, ok := ctx.Value(progressKey{}).(func(int64)); ok && n > 0 {
		f(n)
	}
}

// ProgressReader returns r reporting what is read from it to ctx's
// progress function; r itself when ctx has none.
func ProgressReader(ctx context.Context, r io.Reader) io.Reader {
	f, ok := ctx.Value(progressKey{}).(func(int64))
	if !ok {
		return r
	}
	return &progressReader{r: r, f: f}
}

type progressReader struct {
	r io.Reader
	f func(int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.f(int64(n))
	}
	if err == io.EOF {
		p.f(0)
	}
	return n, err
}
