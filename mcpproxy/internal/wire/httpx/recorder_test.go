package httpx

import (
	"errors"
	"io"
	"net/http"
	"testing"
)

func TestRecorder(t *testing.T) {
	t.Run("informational then answer", func(t *testing.T) {
		c := NewRecorder()
		go func() {
			c.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			c.WriteHeader(http.StatusEarlyHints)
			c.Write([]byte("data: 1\n\n"))
			c.Header().Set("X-Late", "1") // after the status: not sent
			c.Close()
		}()
		<-c.Started()
		b, err := io.ReadAll(c.Body())
		if err != nil || string(b) != "data: 1\n\n" {
			t.Fatalf("body %q, %v", b, err)
		}
		if c.Status() != http.StatusOK || c.MediaType() != "text/event-stream" || c.Sent().Get("X-Late") != "" {
			t.Fatalf("status %d, type %q, sent %v", c.Status(), c.MediaType(), c.Sent())
		}
	})
	t.Run("nothing written", func(t *testing.T) {
		c := NewRecorder()
		c.Close()
		<-c.Started()
		if b, _ := io.ReadAll(c.Body()); c.Status() != http.StatusOK || len(b) != 0 || c.MediaType() != "" {
			t.Fatalf("status %d, body %q, type %q", c.Status(), b, c.MediaType())
		}
	})
	t.Run("stopped", func(t *testing.T) {
		c := NewRecorder()
		stop := errors.New("gone")
		c.Stop(stop)
		if _, err := c.Write([]byte("x")); !errors.Is(err, stop) {
			t.Fatalf("write after Stop: %v", err)
		}
	})
}
